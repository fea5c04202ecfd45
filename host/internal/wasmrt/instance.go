package wasmrt

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
)

// stderrKeep is how much of a guest's stderr an instance keeps per call: a
// Go guest's panic message and the first frames of its trace.
const stderrKeep = 2048

// Instance is one instantiated plugin. It serves one call at a time; after
// a call fails for any reason other than a plugin-reported error the
// instance must be closed, because a trapped guest is unusable even when a
// next call seems to succeed.
type Instance struct {
	plugin *extism.Plugin
	mem    *memoryTracker
	stderr *capBuffer
}

// NewInstance instantiates the module with each linear memory capped at
// limitPages pages.
func (m *Module) NewInstance(ctx context.Context, limitPages uint32) (*Instance, error) {
	mem := newMemoryTracker(uint64(limitPages) * PageSize)
	stderr := &capBuffer{max: stderrKeep}
	ictx := experimental.WithMemoryAllocator(ctx, mem)
	p, err := m.compiled.Instance(ictx, extism.PluginInstanceConfig{
		// wazero's defaults are a fixed-seed random source and fake
		// clocks, which make every instance draw the same "random" keys.
		ModuleConfig: wazero.NewModuleConfig().WithStderr(stderr).
			WithRandSource(rand.Reader).WithSysWalltime().WithSysNanotime(),
	})
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	in := &Instance{plugin: p, mem: mem, stderr: stderr}
	switch {
	case mem.Count() < 2:
		// Both the plugin's and the kernel's memory must be capped; if the
		// runtime ever stops honouring the allocator, refuse to run.
		in.Close(ctx)
		return nil, errors.New("instantiate: memory limit not enforceable")
	case mem.OverLimit():
		in.Close(ctx)
		return nil, fmt.Errorf("instantiate: initial memory above %d pages: %w", limitPages, hosterr.ErrMemoryLimit)
	}
	return in, nil
}

// MemoryBytes is the current size of the instance's linear memories (the
// plugin's and the kernel's). Linear memory never shrinks.
func (in *Instance) MemoryBytes() uint64 { return in.mem.Bytes() }

// HitMemoryLimit reports whether a memory of the instance was ever refused
// growth; such an instance should not be reused even if its call succeeded.
func (in *Instance) HitMemoryLimit() bool { return in.mem.Refused() }

// Close frees the instance.
func (in *Instance) Close(ctx context.Context) error {
	return in.plugin.Close(context.WithoutCancel(ctx))
}

// Call runs export with input. Errors:
//   - *abi.Error when the plugin reported one (the instance stays usable);
//   - hosterr.ErrTimeout when ctx's deadline stopped the guest;
//   - ctx.Err() (wrapped) when ctx was cancelled;
//   - hosterr.ErrMemoryLimit when a memory was refused growth;
//   - hosterr.ErrTrap for any other trap (a Go guest's panic included),
//     with what the guest wrote to stderr.
//
// Output is not limited here beyond the kernel memory cap; the caller
// checks its size before decoding.
func (in *Instance) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	in.stderr.Reset()
	rc, out, err := in.plugin.CallWithContext(ctx, export, input)
	if err == nil {
		if rc != 0 {
			return nil, abi.Errorf(abi.CodeInternal, "%s returned %d without setting an error", export, rc)
		}
		return out, nil
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return nil, hosterr.ErrTimeout
		case sys.ExitCodeContextCanceled:
			return nil, context.Canceled
		}
	}
	// The go-sdk flattens errors of the guest runtime's lazy initialisation
	// to text, so the context is the authority on why a call stopped.
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return nil, hosterr.ErrTimeout
	case context.Canceled:
		return nil, context.Canceled
	}
	if in.mem.Refused() {
		return nil, hosterr.ErrMemoryLimit
	}
	// A plugin-reported error is the text of error_set, which the go-sdk
	// returns verbatim; a trap's text comes from the runtime instead.
	if msg := in.plugin.GetError(); msg != "" && msg == err.Error() {
		return nil, abi.DecodeError([]byte(msg))
	}
	return nil, fmt.Errorf("%w: %s%s", hosterr.ErrTrap, firstLine(err.Error()), in.stderrNote())
}

func (in *Instance) stderrNote() string {
	s := strings.TrimSpace(in.stderr.String())
	if s == "" {
		return ""
	}
	return " (plugin stderr: " + firstLine(s) + ")"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// capBuffer keeps the first max bytes written to it and drops the rest, so a
// guest cannot grow host memory through stderr.
type capBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *capBuffer) Reset() {
	b.mu.Lock()
	b.buf.Reset()
	b.mu.Unlock()
}
