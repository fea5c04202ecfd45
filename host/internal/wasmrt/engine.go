// Package wasmrt is the only package of the host that knows about Extism
// and wazero. It compiles plugin modules once per process into an on-disk
// compilation cache, creates instances with a memory limit the host can
// observe, serves the capability host functions, and turns every way a call
// can fail into one of the host's sentinel errors.
package wasmrt

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"golang.org/x/sync/singleflight"

	"github.com/wasmhist/wasmhist/host/internal/capability"
)

// PageSize is the size of one WebAssembly memory page.
const PageSize = 64 << 10

// maxPages is the most pages a 32-bit WebAssembly memory can have.
const maxPages = 65536

// Modules are shared by every Host of the process: compiling a plugin
// costs seconds without the disk cache and tens of milliseconds with it,
// so two hosts (or two loads) of the same bytes compile once.
var (
	registryMu sync.Mutex
	registry   = map[moduleKey]*Module{}
	compiles   singleflight.Group

	cachesMu sync.Mutex
	caches   = map[string]wazero.CompilationCache{}
)

type moduleKey struct {
	cacheDir string
	sum      [32]byte
	pages    uint32
}

// Module is a compiled plugin, shared and reference counted.
type Module struct {
	key      moduleKey
	compiled *extism.CompiledPlugin
	refs     int
}

// Compile returns the compiled module for wasm (whose sha256 is sum),
// compiling it at most once per process for a given cache directory and
// memory limit. Every successful Compile must be paired with Release.
func Compile(ctx context.Context, cacheDir string, sum [32]byte, wasm []byte, pages uint32) (*Module, error) {
	key := moduleKey{cacheDir: cacheDir, sum: sum, pages: pages}
	if m := acquire(key); m != nil {
		return m, nil
	}
	sfKey := fmt.Sprintf("%s\x00%x\x00%d", cacheDir, sum, pages)
	_, err, _ := compiles.Do(sfKey, func() (any, error) {
		registryMu.Lock()
		_, ok := registry[key]
		registryMu.Unlock()
		if ok {
			return nil, nil
		}
		c, err := compile(ctx, cacheDir, wasm, pages)
		if err != nil {
			return nil, err
		}
		registryMu.Lock()
		registry[key] = &Module{key: key, compiled: c}
		registryMu.Unlock()
		return nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", hex.EncodeToString(sum[:])[:12], err)
	}
	if m := acquire(key); m != nil {
		return m, nil
	}
	// The module was released to zero between compile and acquire: the
	// cache is warm, so compiling again is cheap.
	return Compile(ctx, cacheDir, sum, wasm, pages)
}

func acquire(key moduleKey) *Module {
	registryMu.Lock()
	defer registryMu.Unlock()
	m, ok := registry[key]
	if !ok {
		return nil
	}
	m.refs++
	return m
}

// Release drops one reference; the last one frees the compiled code.
func (m *Module) Release(ctx context.Context) error {
	registryMu.Lock()
	m.refs--
	last := m.refs == 0
	if last {
		delete(registry, m.key)
	}
	registryMu.Unlock()
	if last {
		return m.compiled.Close(ctx)
	}
	return nil
}

func compile(ctx context.Context, cacheDir string, wasm []byte, pages uint32) (*extism.CompiledPlugin, error) {
	cache, err := compilationCache(cacheDir)
	if err != nil {
		return nil, err
	}
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		// Preemption: a call's context deadline stops a spinning guest,
		// which otherwise ignores it and stalls the host's GC.
		WithCloseOnContextDone(true)
	manifest := extism.Manifest{
		Wasm: []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}},
		// The memory tracker enforces the exact limit; wazero's maximum is
		// a backstop at twice that, in case an allocator is ever bypassed.
		Memory: &extism.ManifestMemory{MaxPages: min(2*pages, maxPages)},
	}
	return extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{
		RuntimeConfig: rc,
		EnableWasi:    true,
	}, hostFunctions())
}

// compilationCache returns the process's cache for a keyed directory.
func compilationCache(dir string) (wazero.CompilationCache, error) {
	cachesMu.Lock()
	defer cachesMu.Unlock()
	if c, ok := caches[dir]; ok {
		return c, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	caches[dir] = c
	return c, nil
}

var (
	funcsMu     sync.Mutex
	funcs       []capability.Func
	funcsFrozen bool
)

// errFrozen is returned by Register after the first compile.
var errFrozen = errors.New("runtime: capability functions must be registered before the first plugin is compiled")

// Register adds a capability host function. Host functions are bound into a
// module when it is compiled, so every Register must happen before the
// first Compile of the process (from an init function).
func Register(f capability.Func) error {
	funcsMu.Lock()
	defer funcsMu.Unlock()
	if funcsFrozen {
		return errFrozen
	}
	for _, g := range funcs {
		if g.Name == f.Name {
			return fmt.Errorf("runtime: capability function %q registered twice", f.Name)
		}
	}
	funcs = append(funcs, f)
	return nil
}

// Registered lists the registered capability functions.
func Registered() []capability.Func {
	funcsMu.Lock()
	defer funcsMu.Unlock()
	return append([]capability.Func(nil), funcs...)
}

func hostFunctions() []extism.HostFunction {
	funcsMu.Lock()
	funcsFrozen = true
	fs := append([]capability.Func(nil), funcs...)
	funcsMu.Unlock()
	out := make([]extism.HostFunction, 0, len(fs))
	for _, f := range fs {
		out = append(out, hostFunction(f))
	}
	return out
}
