package wasmrt

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/bulk"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
)

// stderrKeep is how much of a guest's stderr an instance keeps per call: a
// Go guest's panic message and the first frames of its trace.
const stderrKeep = 2048

// Instance is one instantiated plugin. It serves one call at a time; after
// a call fails for any reason other than a plugin-reported error the
// instance must be closed, because a trapped guest is unusable even when a
// next call seems to succeed.
type Instance struct {
	// module and code are what the instance was made of: code is the
	// module's code at the time.
	module *Module
	code   *compiled
	closed bool

	mod    api.Module
	kern   *kernel
	mem    *memoryTracker
	stderr *capBuffer

	// init is the guest runtime's initialisation, run before the first
	// call (nil once it ran, or if the module has none).
	init api.Function
	// exports are the functions called so far, resolved once: a lookup by
	// name creates a call engine, with its stack, every time.
	exports map[string]api.Function
	stack   [1]uint64
	// directIn and directOut are the direct transport's exports (SPEC
	// section 2.5), nil if the module has none.
	directIn, directOut api.Function
	// capabilityBuffer is the export that names the buffer of direct
	// capability calls (SPEC section 2.6); nil if the module has none, and
	// once it has been asked.
	capabilityBuffer api.Function

	// interrupt is the flag of a module rewritten by package instrument
	// for the compiler (nil otherwise): set, it stops the guest at its
	// next check. fire sets it (and stopped) when a call's context ends,
	// then signals fired; on the interpreter fire sets stopped only.
	interrupt api.MutableGlobal
	// stopped is set with the interrupt flag: the guest's writes to
	// stdout and stderr then fail, so that one fd_write of millions of
	// iovecs ends at the next one.
	stopped *atomic.Bool
	// depth counts the stack of the guest's calls in flight
	// (instrument.MaxDepth); each call starts it at zero.
	depth api.MutableGlobal
	fire  func()
	fired chan struct{}
	// testReturned, when set, runs after the guest returned, before the
	// call stops watching its context.
	testReturned func()
	// testStarted, when set, runs once the guest runtime's initialisation
	// returned and the instance settled, before the first export runs.
	testStarted func()
}

// The direct transport's exports (SPEC section 2.5).
const (
	directInputExport  = "wasmhist_input_buffer"
	directOutputExport = "wasmhist_output"
	// capabilityBufferExport names the buffer of direct capability calls
	// (SPEC section 2.6).
	capabilityBufferExport = "wasmhist_capability_buffer"
)

// NewInstance instantiates the module with each linear memory, and kernel
// memory, capped at limitPages pages.
func (m *Module) NewInstance(ctx context.Context, limitPages uint32) (*Instance, error) {
	c := m.code()
	if !c.acquire() {
		// Retired as it was read: the code that replaced it is current.
		if c = m.code(); !c.acquire() {
			return nil, errors.New("instantiate: the module is closed")
		}
	}
	in, err := c.newInstance(ctx, limitPages)
	if err != nil {
		c.released(ctx)
		return nil, err
	}
	in.module, in.code = m, c
	return in, nil
}

func (c *compiled) newInstance(ctx context.Context, limitPages uint32) (*Instance, error) {
	limit := uint64(limitPages) * PageSize
	mem := newMemoryTracker(limit, c.image)
	stopped := new(atomic.Bool)
	stderr := &capBuffer{max: stderrKeep, stopped: stopped}
	// wazero's defaults are a fixed-seed random source and fake clocks,
	// which make every instance draw the same "random" keys. The host
	// calls no start function (SPEC section 2.4).
	cfg := wazero.NewModuleConfig().WithStderr(stderr).WithStdout(discard{stopped}).
		WithRandSource(rand.Reader).WithSysWalltime().WithSysNanotime().
		WithStartFunctions().
		WithName("main_" + strconv.FormatUint(c.instances.Add(1), 10))
	if _, ok := os.LookupEnv("EXTISM_ENABLE_WASI_OUTPUT"); ok {
		// As go-sdk does: an operator debugging a plugin sees its output.
		cfg = cfg.WithStdout(os.Stdout).WithStderr(os.Stderr)
	}
	mod, err := c.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mem), c.module, cfg)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	in := &Instance{mod: mod, kern: newKernel(limit, mem), mem: mem, stderr: stderr, exports: map[string]api.Function{}}
	if c.init != "" {
		in.init = mod.ExportedFunction(c.init)
	}
	if c.interruptible {
		g, ok := mod.ExportedGlobal(instrument.InterruptExport).(api.MutableGlobal)
		if !ok {
			in.mod.Close(ctx)
			return nil, errors.New("instantiate: the interrupt flag is missing")
		}
		depth, ok := mod.ExportedGlobal(instrument.DepthExport).(api.MutableGlobal)
		if !ok {
			in.mod.Close(ctx)
			return nil, errors.New("instantiate: the depth counter is missing")
		}
		in.depth, in.fired, in.stopped = depth, make(chan struct{}, 1), stopped
		if c.interpreted {
			// The interpreter stops the guest itself (instrument.
			// ForInterpreter): the flag stays clear.
			in.fire = func() {
				stopped.Store(true)
				in.fired <- struct{}{}
			}
		} else {
			in.interrupt = g
			in.fire = func() {
				stopped.Store(true)
				g.Set(1)
				in.fired <- struct{}{}
			}
		}
	}
	if c.direct {
		in.directIn, in.directOut = mod.ExportedFunction(directInputExport), mod.ExportedFunction(directOutputExport)
	}
	if c.capabilityBuffer {
		in.capabilityBuffer = mod.ExportedFunction(capabilityBufferExport)
	}
	switch {
	case c.hasMemory && mem.Count() < 1:
		// The plugin's memory must be capped; if the runtime ever stops
		// honouring the allocator, refuse to run.
		in.mod.Close(ctx)
		return nil, errors.New("instantiate: memory limit not enforceable")
	case mem.ImageLost():
		in.mod.Close(ctx)
		return nil, errors.New("instantiate: the initial memory image could not be read from the compilation cache")
	case mem.OverLimit():
		in.mod.Close(ctx)
		return nil, fmt.Errorf("instantiate: initial memory above %d pages: %w", limitPages, hosterr.ErrMemoryLimit)
	}
	return in, nil
}

// MemoryBytes is the current size of the instance's linear memory and
// kernel memory. Neither shrinks.
func (in *Instance) MemoryBytes() uint64 { return in.mem.Bytes() + uint64(len(in.kern.mem)) }

// HitMemoryLimit reports whether a memory of the instance was ever refused
// growth; such an instance should not be reused even if its call succeeded.
func (in *Instance) HitMemoryLimit() bool { return in.mem.Refused() }

// Current reports whether the instance runs on its module's current
// code: an instance made on the interpreter before the compiler's code
// replaced it is not, and is better closed than reused.
func (in *Instance) Current() bool { return in.module.code() == in.code }

// Exited reports whether the guest ended its module (proc_exit): nothing
// of it may run again, so the instance must not go back to a pool.
func (in *Instance) Exited() bool { return in.closed || in.mod.IsClosed() }

// Interpreted reports whether the instance runs on wazero's interpreter.
func (in *Instance) Interpreted() bool { return in.code.interpreted }

// Close frees the instance.
func (in *Instance) Close(ctx context.Context) error {
	if in.closed {
		return nil
	}
	in.closed = true
	err := in.mod.Close(context.WithoutCancel(ctx))
	in.code.released(ctx)
	return err
}

// Call runs export with input. Errors:
//   - *abi.Error when the plugin reported one (the instance stays usable);
//   - hosterr.ErrTimeout when ctx's deadline stopped the guest;
//   - ctx.Err() (wrapped) when ctx was cancelled;
//   - hosterr.ErrMemoryLimit when a memory was refused growth;
//   - hosterr.ErrTrap for any other trap (a Go guest's panic included),
//     with what the guest wrote to stderr.
//
// The output is a copy the caller owns: nothing of the instance's memory
// shows through it. Output is not limited here beyond the kernel memory
// cap; the caller checks its size before decoding.
func (in *Instance) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	// A deadline already past never starts a call, even before its
	// context's timer has fired (a 1 ns timeout would otherwise let a
	// short call run to its end).
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return nil, hosterr.ErrTimeout
	}
	if in.code.interpreted {
		defer in.code.returned()
	}
	in.code.callStarts()
	defer in.code.callEnds()
	if in.fire == nil {
		return in.call(ctx, export, input)
	}
	if err := ctx.Err(); err != nil {
		return nil, in.failure(ctx, err)
	}
	stop := context.AfterFunc(ctx, in.fire)
	out, err := in.call(ctx, export, input)
	if in.testReturned != nil {
		in.testReturned()
	}
	if !stop() {
		// The context ended during the call: wait for the flag to be set,
		// then clear it, in case the guest returned before it looked.
		<-in.fired
		if in.interrupt != nil {
			in.interrupt.Set(0)
		}
		in.stopped.Store(false)
	}
	return out, err
}

// start runs the guest runtime's initialisation, init, and then gives
// back what it leaves that no call needs (settle, dropText). Faults in the
// code map whole windows meanwhile (guestStarts).
func (in *Instance) start(ctx context.Context, init api.Function) error {
	in.code.guestStarts()
	defer in.code.guestStarted()
	if err := in.run(ctx, init); err != nil {
		return err
	}
	in.mem.settle()
	in.code.dropText()
	if in.testStarted != nil {
		in.testStarted()
	}
	return nil
}

func (in *Instance) call(ctx context.Context, export string, input []byte) ([]byte, error) {
	in.stderr.Reset()
	if in.mod.IsClosed() {
		return nil, fmt.Errorf("%w: instance is closed", hosterr.ErrTrap)
	}
	f, ok := in.exports[export]
	if !ok {
		if f = in.mod.ExportedFunction(export); f == nil {
			return nil, fmt.Errorf("%w: unknown function: %s", hosterr.ErrTrap, export)
		}
		if d := f.Definition(); len(d.ParamTypes()) != 0 || len(d.ResultTypes()) > 1 {
			return nil, fmt.Errorf("%w: export %s is not a () -> i32 function", hosterr.ErrTrap, export)
		}
		in.exports[export] = f
	}
	if !in.kern.setInput(input) {
		return nil, hosterr.ErrMemoryLimit
	}
	kctx := capability.WithValue(ctx, kernelKey{}, in.kern)
	if init := in.init; init != nil {
		in.init = nil
		if err := in.start(kctx, init); err != nil {
			return nil, in.failure(ctx, fmt.Errorf("initialize guest runtime: %w", err))
		}
	}
	if buf := in.capabilityBuffer; buf != nil {
		// Once per instance, after the runtime's initialisation: the
		// buffer lives as long as the instance. One outside memory is
		// never used (capabilityBuffer checks each call's bytes).
		in.capabilityBuffer = nil
		in.stack[0] = 0
		if err := in.run(kctx, buf); err != nil {
			return nil, in.failure(ctx, fmt.Errorf("%s: %w", capabilityBufferExport, err))
		}
		in.kern.capAddr, in.kern.capLen = uint32(in.stack[0]>>32), uint32(in.stack[0])
	}
	direct := in.directIn != nil && uint64(len(input)) <= math.MaxUint32
	if direct {
		// One copy into the plugin's memory rather than its reading the
		// kernel 8 bytes per call. The input stays in the kernel too, for
		// whatever else reads it there.
		in.stack[0] = uint64(len(input))
		if err := in.run(kctx, in.directIn); err != nil {
			return nil, in.failure(ctx, err)
		}
		view, ok := in.mod.Memory().Read(uint32(in.stack[0]), uint32(len(input)))
		if !ok {
			return nil, fmt.Errorf("%w: %s returned a buffer outside memory", hosterr.ErrTrap, directInputExport)
		}
		bulk.Copy(view, input)
	}
	in.stack[0] = 0
	err := in.run(kctx, f)
	var exit *sys.ExitError
	exited := false
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		// proc_exit(0): a successful return, as go-sdk treats it, with
		// the module closed: nothing of it may run or be read again (its
		// memory is gone), only the kernel's output, which is the host's.
		err, exited = nil, true
	}
	if err != nil {
		return nil, in.failure(ctx, err)
	}
	// SPEC section 2.2: an export that called error_set failed with that
	// error whatever it returned.
	if msg := in.kern.errorText(); msg != "" {
		return nil, abi.DecodeError([]byte(msg))
	}
	if rc := uint32(in.stack[0]); !exited && len(f.Definition().ResultTypes()) == 1 && rc != 0 {
		return nil, abi.Errorf(abi.CodeInternal, "%s returned %d without setting an error", export, rc)
	}
	if exited && direct {
		return nil, fmt.Errorf("%w: %s called proc_exit(0) (os.Exit) instead of returning, so its output in its own memory is gone: an export must return (SPEC section 2)", hosterr.ErrTrap, export)
	}
	if direct {
		if err := in.run(kctx, in.directOut); err != nil {
			return nil, in.failure(ctx, err)
		}
		if at := in.stack[0]; at != 0 {
			b, ok := in.mod.Memory().Read(uint32(at>>32), uint32(at))
			if !ok {
				return nil, fmt.Errorf("%w: %s: output outside memory", hosterr.ErrTrap, directOutputExport)
			}
			return bulk.Clone(b), nil
		}
	}
	out, ok := in.kern.outputBytes()
	if !ok {
		return nil, fmt.Errorf("%w: %s: output outside kernel memory", hosterr.ErrTrap, export)
	}
	return out, nil
}

// run calls f with the instance's stack, from the depth of a call from
// the host.
func (in *Instance) run(ctx context.Context, f api.Function) error {
	if in.depth != nil {
		in.depth.Set(0)
	}
	return f.CallWithStack(ctx, in.stack[:])
}

// failure turns an error of a guest call into the host's sentinel.
func (in *Instance) failure(ctx context.Context, err error) error {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return hosterr.ErrTimeout
		case sys.ExitCodeContextCanceled:
			return context.Canceled
		}
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return hosterr.ErrTimeout
	case context.Canceled:
		return context.Canceled
	}
	if in.mem.Refused() {
		return hosterr.ErrMemoryLimit
	}
	if in.depth != nil && int32(in.depth.Get()) > instrument.MaxDepth {
		return fmt.Errorf("%w: calls nested deeper than %d MiB of stack (a runaway recursion?)%s", hosterr.ErrTrap, instrument.MaxDepth*instrument.StackUnit>>20, in.stderrNote())
	}
	return fmt.Errorf("%w: %s%s", hosterr.ErrTrap, firstLine(err.Error()), in.stderrNote())
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
	mu      sync.Mutex
	max     int
	buf     bytes.Buffer
	stopped *atomic.Bool
}

// errStopped fails a guest's write once its call's context has ended.
var errStopped = errors.New("the call's context ended")

func (b *capBuffer) Write(p []byte) (int, error) {
	if b.stopped.Load() {
		return 0, errStopped
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// discard is the guest's stdout: nothing is kept.
type discard struct{ stopped *atomic.Bool }

func (d discard) Write(p []byte) (int, error) {
	if d.stopped.Load() {
		return 0, errStopped
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
