// Package wasmrt is the only package of the host that knows about Extism
// and wazero. It compiles plugin modules once per Engine (one per Host),
// rewritten by package instrument so that a call's context can stop them,
// through a compilation cache on disk and in memory, creates instances with
// a memory limit the host can observe, serves the Extism kernel and the
// capability host functions, and turns every way a call can fail into one
// of the host's sentinel errors.
package wasmrt

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/loader"
)

// PageSize is the size of one WebAssembly memory page.
const PageSize = 64 << 10

// maxPages is the most pages a 32-bit WebAssembly memory can have.
const maxPages = 65536

// compileTimeout bounds one compilation. A compile runs detached from the
// caller's cancellation (other loads may be waiting for it), so this is what
// stops one that hangs. A cold compile of the sample plugins takes seconds.
const compileTimeout = 5 * time.Minute

// Cache is a compilation cache: machine code on disk, shared across
// processes, and in memory, shared by every Engine that uses the Cache.
// Whoever creates it closes it, after the engines using it.
type Cache struct {
	cache wazero.CompilationCache
	dir   string
}

// NewCache opens the compilation cache in dir, which it creates.
func NewCache(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	return &Cache{cache: c, dir: dir}, nil
}

// Close frees the compiled code the cache holds in memory.
func (c *Cache) Close(ctx context.Context) error { return c.cache.Close(ctx) }

// Engine compiles the modules of one Host and owns them: two loads of the
// same bytes share one compiled module, and Close frees every module.
type Engine struct {
	cache *Cache
	funcs []capability.Func

	mu       sync.Mutex
	modules  map[moduleKey]*Module
	flights  map[moduleKey]*flight
	closed   bool
	inflight sync.WaitGroup
	// closing is closed by Close: the compilations waiting for their
	// module's first call start then.
	closing chan struct{}

	// apart are the limits of its compile processes; zero: the defaults.
	apart apartLimits
	// interpretFirst: a module the cache has not compiled yet is served
	// on wazero's interpreter while the compiler works in the background
	// (firstUse). NewEngine sets it.
	interpretFirst bool

	// testJoined, when set, runs when a Compile waits for a compilation
	// another Compile started.
	testJoined func()
	// testCompiling, when set, runs at the start of each compilation.
	testCompiling func()
	// testBackground, when set, runs before the background compilation
	// of a module served on the interpreter; false: there is none.
	testBackground func() bool
}

// flight is one compilation in progress.
type flight struct {
	done chan struct{}
	err  error
}

type moduleKey struct {
	sum   [32]byte
	pages uint32
}

// NewEngine returns an engine compiling through cache, binding funcs as the
// capability host functions of every module.
func NewEngine(cache *Cache, funcs []capability.Func) *Engine {
	return &Engine{
		cache:   cache,
		funcs:   append([]capability.Func(nil), funcs...),
		modules: map[moduleKey]*Module{},
		flights: map[moduleKey]*flight{},
		closing: make(chan struct{}),

		interpretFirst: true,
	}
}

// Module is a compiled plugin, shared and reference counted. Its code is
// the machine code of wazero's compiler, or, while that is being compiled
// for a module used for the first time, wazero's interpreter (firstUse):
// each instance runs on the code that was current when it was created.
type Module struct {
	engine *Engine
	key    moduleKey
	cur    atomic.Pointer[compiled]
	refs   int

	// done is closed once the module runs on the compiler's code, or
	// will not: compileErr then says why.
	done       chan struct{}
	compileErr error
	// interp is the interpreter's code the module started on, if it did;
	// it is closed with its last instance once the compiler's replaced
	// it, or with the module.
	interp *compiled
}

// newModule returns a module on c, compiled.
func newModule(e *Engine, key moduleKey, c *compiled) *Module {
	m := &Module{engine: e, key: key, done: make(chan struct{})}
	m.cur.Store(c)
	if c.interpreted {
		m.interp = c
	} else {
		close(m.done)
	}
	return m
}

// code is the code new instances run on.
func (m *Module) code() *compiled { return m.cur.Load() }

// Interpreted reports whether new instances run on wazero's interpreter,
// the module's compilation not having replaced it (yet).
func (m *Module) Interpreted() bool { return m.code().interpreted }

// Compiled is closed once the module's compilation ended: its new
// instances run on the compiler's code, or CompileErr says why not.
func (m *Module) Compiled() <-chan struct{} { return m.done }

// CompileErr is why the module's compilation failed, leaving it on the
// interpreter; nil while in progress or when it succeeded.
func (m *Module) CompileErr() error {
	select {
	case <-m.done:
		return m.compileErr
	default:
		return nil
	}
}

// close frees the module's code, the interpreter's included, each once
// its last instance is closed: closing a runtime unmaps its instances'
// memories, which a call still running would write into, or fault on.
func (m *Module) close(ctx context.Context) error {
	err := m.code().retire(ctx)
	if m.interp != nil {
		err = errors.Join(err, m.interp.retire(ctx))
	}
	return err
}

// compiled is a module compiled in a runtime of its own, in which the
// kernel, WASI and the capability functions are instantiated once and
// every instance of the module is created.
type compiled struct {
	rt     wazero.Runtime
	module wazero.CompiledModule
	// init is the guest runtime's initialisation export, "" if none.
	init string
	// hasMemory: the module defines a linear memory, which the memory
	// tracker must see.
	hasMemory bool
	// direct: the module has the direct transport's exports (SPEC section
	// 2.5), with their signatures.
	direct bool
	// capabilityBuffer: the module has the direct transport, imports a
	// capability function and exports the buffer of direct capability
	// calls (SPEC section 2.6).
	capabilityBuffer bool
	// interruptible: the module was rewritten by package instrument and
	// exports its interrupt flag.
	interruptible bool
	// skeleton: compiled from the kept skeleton (skeleton.go).
	skeleton bool
	// cache, when set, is the compilation cache of this module alone,
	// closed with it.
	cache wazero.CompilationCache
	// interpreted: the code is wazero's interpreter's.
	interpreted bool
	// image, when set, is the module's initial memory, which its data
	// segments were moved to (image.go).
	image *memImage
	// text, when set, is the module's machine code as mapCode mapped it
	// from the cache (dropText). Its faults map single pages while no
	// instance's guest starts (guestStarts).
	text []byte
	// faults: how faults in text map pages now (textFaults).
	faults textFaults
	// entry, when set, is what the load from the skeleton that made the
	// module did with its code (mapCode).
	entry     *entryCode
	instances atomic.Uint64
	// calling counts the calls running on the code; idle gives its
	// mapped code back once none has run for idleText (idleDrop).
	calling  atomic.Int32
	idle     *time.Timer
	idleOnce sync.Once // makes idle, or, from Close, rules it out

	mu sync.Mutex
	// live counts the instances not closed yet.
	live int
	// retired: the module moved on to other code; the runtime closes
	// with its last instance.
	retired, closed bool

	// called is closed when the first call on the code returned, or the
	// code closed (firstUse).
	called     chan struct{}
	calledOnce sync.Once
}

// idleText is how long a module's code goes without a call before it
// gives its resident pages back (RATIONALE: "Why does an idle build give
// its code back?"). A var for tests.
var idleText = 2 * time.Second

// callStarts counts a call on the code.
func (c *compiled) callStarts() { c.calling.Add(1) }

// callEnds uncounts a call; the last one running arms the idle drop. It
// takes no lock: a timer armed after Close fires on a closed module,
// which idleDrop leaves alone.
func (c *compiled) callEnds() {
	if c.calling.Add(-1) != 0 || c.text == nil {
		return
	}
	made := false
	c.idleOnce.Do(func() { c.idle, made = time.AfterFunc(idleText, c.idleDrop), true })
	if !made && c.idle != nil {
		c.idle.Reset(idleText)
	}
}

// idleDrop gives the code's resident pages back unless a call runs. It
// holds mu, so Close, which unmaps the code after taking mu, never
// finds the pages being given back, nor this finds them unmapped. A call
// that starts meanwhile faults back in what it runs.
func (c *compiled) idleDrop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.calling.Load() != 0 {
		return
	}
	c.dropText()
}

// returned records that a call on the code returned.
func (c *compiled) returned() { c.calledOnce.Do(func() { close(c.called) }) }

// Close frees the runtime, its compiled code and every instance left, at
// once: only for code no instance runs on (retire waits for them).
func (c *compiled) Close(ctx context.Context) error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.idleOnce.Do(func() {}) // no timer made from now on
	if c.idle != nil {
		c.idle.Stop()
	}
	c.mu.Unlock()
	if already {
		return nil
	}
	c.returned()
	// Before the runtime: once it is closed, wazero may unmap the code and
	// map other code at its address.
	c.releaseText()
	err := c.rt.Close(context.WithoutCancel(ctx))
	if c.image != nil {
		err = errors.Join(err, c.image.close())
	}
	if c.cache != nil {
		err = errors.Join(err, c.cache.Close(context.WithoutCancel(ctx)))
	}
	return err
}

// acquire counts a new instance, unless the code is retired or closed.
func (c *compiled) acquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired || c.closed {
		return false
	}
	c.live++
	return true
}

// released uncounts an instance closed; the last one of retired code
// closes it.
func (c *compiled) released(ctx context.Context) {
	c.mu.Lock()
	c.live--
	last := c.retired && c.live == 0
	c.mu.Unlock()
	if last {
		c.Close(ctx)
	}
}

// retire stops new instances of c; it closes now if none is left, and
// otherwise with the last one.
func (c *compiled) retire(ctx context.Context) error {
	c.mu.Lock()
	c.retired = true
	last := c.live == 0
	c.mu.Unlock()
	if last {
		return c.Close(ctx)
	}
	return nil
}

// errTestHeld: a test kept the module on the interpreter.
var errTestHeld = errors.New("wasmrt: compilation held by a test")

// ErrClosed is returned by Compile after Close.
var ErrClosed = errors.New("wasmrt: engine closed")

// Compile returns the compiled module for wasm (whose sha256 is sum),
// compiling it at most once at a time for a given memory limit. Every
// successful Compile must be paired with Release.
//
// The compilation itself does not run under ctx: it serves every Compile
// waiting for the same module, so one caller giving up must not fail the
// others. A caller whose ctx ends stops waiting and gets ctx's error; the
// compilation goes on, bounded by compileTimeout, and its module waits for
// the next Compile or for Close.
func (e *Engine) Compile(ctx context.Context, sum [32]byte, wasm []byte, pages uint32) (*Module, error) {
	return e.CompileFrom(ctx, sum, func() ([]byte, error) { return wasm, nil }, pages)
}

// CompileFrom is Compile for a module whose bytes read returns when they
// are needed: never when the module is compiled already, or the cache
// holds its skeleton (a warm load). read must return the bytes whose
// sha256 is sum, or fail; a compilation calls it at most once.
func (e *Engine) CompileFrom(ctx context.Context, sum [32]byte, read func() ([]byte, error), pages uint32) (*Module, error) {
	key := moduleKey{sum: sum, pages: pages}
	short := hex.EncodeToString(sum[:])[:12]
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, ErrClosed
		}
		if m, ok := e.modules[key]; ok {
			m.refs++
			e.mu.Unlock()
			return m, nil
		}
		f, joined := e.flights[key]
		if !joined {
			f = &flight{done: make(chan struct{})}
			e.flights[key] = f
			e.inflight.Add(1)
			go e.compileFlight(context.WithoutCancel(ctx), key, f, read)
		}
		e.mu.Unlock()
		if joined && e.testJoined != nil {
			e.testJoined()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("compile %s: %w", short, ctx.Err())
		case <-f.done:
		}
		if f.err != nil {
			return nil, fmt.Errorf("compile %s: %w", short, f.err)
		}
		// The module is registered, unless it was released to zero or the
		// engine closed in between; the loop then finds out which.
	}
}

func (e *Engine) compileFlight(ctx context.Context, key moduleKey, f *flight, read func() ([]byte, error)) {
	defer e.inflight.Done()
	if e.testCompiling != nil {
		e.testCompiling()
	}
	if e.interpretFirst && !e.cache.compiledApart(key.sum) {
		wasm, err := read()
		if err != nil {
			e.register(ctx, key, f, nil, err)
			return
		}
		e.firstUse(ctx, key, f, wasm)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, compileTimeout)
	defer cancel()
	c, err := compile(ctx, e.cache, e.funcs, key.sum, read, key.pages, func(wasm []byte) error {
		return e.compileApart(ctx, wasm, key.pages)
	})
	if err == nil {
		e.cache.share(c)
	}
	e.register(ctx, key, f, c, err)
}

// register ends flight f with the module on c, or with err.
func (e *Engine) register(ctx context.Context, key moduleKey, f *flight, c *compiled, err error) *Module {
	var m *Module
	e.mu.Lock()
	delete(e.flights, key)
	if err == nil && e.closed {
		err = ErrClosed
		defer c.Close(ctx)
	} else if err == nil {
		m = newModule(e, key, c)
		e.modules[key] = m
	}
	f.err = err
	e.mu.Unlock()
	close(f.done)
	return m
}

// firstUse serves a module the cache has not compiled on wazero's
// interpreter, which reaches a first call in a fraction of the compiler's
// time, then compiles it as compile does (in a compile process, into the
// cache) and moves the module's new instances to the compiler's code. The
// module is rewritten as it would be for the compiler, so that a call's
// deadline stops it and every limit holds alike on both (RATIONALE: "Why
// does a plugin's first use run on the interpreter?").
//
// A module past the static bounds is refused before anything compiles it
// (interpret), as compileApart would; one that a compile process refused before is
// refused with the error it recorded. A compilation that fails in the
// background leaves the module on the interpreter (Module.CompileErr).
// Close waits for the compilation, which leaves the cache warm.
func (e *Engine) firstUse(ctx context.Context, key moduleKey, f *flight, wasm []byte) {
	ictx, cancel := context.WithTimeout(ctx, compileTimeout)
	defer cancel()
	if err := e.cache.refusedApart(key.sum); err != nil {
		e.register(ctx, key, f, nil, err)
		return
	}
	c, err := interpret(ictx, e.cache, e.funcs, wasm, key.pages)
	m := e.register(ctx, key, f, c, err)
	if m == nil {
		return
	}
	// The compiler starts once the first call returned, so that it does
	// not take the CPU that call needs; or when the engine closes first,
	// so that the cache holds the module for the next process.
	select {
	case <-c.called:
	case <-e.closing:
	}
	cctx, cancel := context.WithTimeout(ctx, compileTimeout)
	defer cancel()
	c, err = nil, errTestHeld
	if e.testBackground == nil || e.testBackground() {
		c, err = compile(cctx, e.cache, e.funcs, key.sum, bytesOf(wasm), key.pages, func(wasm []byte) error {
			return e.compileApart(cctx, wasm, key.pages)
		})
		if err == nil {
			e.cache.share(c)
		}
	}
	if errors.Is(err, hosterr.ErrCompileLimit) {
		e.cache.markRefused(key.sum, err)
	}
	e.mu.Lock()
	switched := false
	switch {
	case err != nil:
		m.compileErr = err
	case e.closed || e.modules[key] != m:
		// Released or closed meanwhile: nothing runs it any more.
		defer c.Close(ctx)
	default:
		m.cur.Store(c)
		switched = true
	}
	e.mu.Unlock()
	if switched {
		// Before done: whoever waits on Compiled finds the interpreter's
		// code retired, closing with its last instance.
		m.interp.retire(ctx)
	}
	close(m.done)
}

// interpret compiles wasm for wazero's interpreter, with its preemption:
// rewritten by instrument.ForInterpreter, or else, as compile does, bounded.
// A module past the static bounds on its code (loader.CheckCode) is
// refused before anything compiles it: the rewrite checks each function
// as it reads it, and a module it does not rewrite is checked whole.
func interpret(ctx context.Context, cache *Cache, funcs []capability.Func, wasm []byte, pages uint32) (*compiled, error) {
	rewritten, err := instrument.ForInterpreter(wasm, loader.CheckShape)
	if errors.Is(err, hosterr.ErrCompileLimit) {
		return nil, err
	}
	if err == nil {
		c, err := compileIn(ctx, cache, funcs, rewritten, pages, true, true)
		if err == nil {
			c.interruptible = true
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
	} else if err := loader.CheckCode(wasm); err != nil {
		return nil, err
	}
	bounded, err := instrument.BoundTables(wasm)
	if err != nil {
		return nil, err
	}
	return compileIn(ctx, cache, funcs, bounded, pages, true, true)
}

// Release drops one reference; the last one frees the compiled code, once
// no instance runs on it.
func (m *Module) Release(ctx context.Context) error {
	e := m.engine
	e.mu.Lock()
	m.refs--
	last := m.refs == 0 && e.modules[m.key] == m
	if last {
		delete(e.modules, m.key)
	}
	e.mu.Unlock()
	if last {
		return m.close(ctx)
	}
	return nil
}

// Close waits for compilations in progress and frees every module: at
// once the code no instance runs on, and other code with its last
// instance (Module.close). The cache is the caller's to close, afterwards.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		close(e.closing)
	}
	e.closed = true
	e.mu.Unlock()
	e.inflight.Wait()
	e.mu.Lock()
	ms := e.modules
	e.modules = map[moduleKey]*Module{}
	e.mu.Unlock()
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.close(ctx))
	}
	return errors.Join(errs...)
}

// bytesOf is a module's bytes in hand, for compile.
func bytesOf(wasm []byte) func() ([]byte, error) { return func() ([]byte, error) { return wasm, nil } }

// compile compiles the module read returns (whose sha256 is sum) rewritten
// by package instrument, so that a call's context stops it without the
// cost of the runtime's own preemption. A module the rewrite does not
// support, or whose rewrite the runtime refuses, is compiled as it is but
// for its tables' bounds (instrument.BoundTables), with the runtime's
// preemption. read is called only if the cache's skeleton or kept rewrite
// does not do, at most once.
//
// Unless a compile process compiled the module before (Cache.compiledApart),
// apart first compiles it in one, into the cache (compileApart); apart is
// nil in that process.
func compile(ctx context.Context, cache *Cache, funcs []capability.Func, sum [32]byte, read func() ([]byte, error), pages uint32, apart func(wasm []byte) error) (*compiled, error) {
	if cache == nil {
		return nil, errors.New("wasmrt: no compilation cache")
	}
	if apart == nil || cache.compiledApart(sum) {
		if c, ok := cache.fromSkeleton(ctx, funcs, sum, pages); ok {
			c.interruptible, c.skeleton = true, true
			return c, nil
		}
	}
	var wasm []byte
	read = sync.OnceValues(read)
	need := func() (err error) {
		wasm, err = read()
		return err
	}
	rewritten, kept := cache.kept(sum)
	if apart != nil && !cache.compiledApart(sum) {
		if err := need(); err != nil {
			return nil, err
		}
		if err := apart(wasm); err != nil && !errors.Is(err, errRefusedApart) {
			return nil, err
		}
		rewritten, kept = cache.kept(sum)
	}
	var err error
	if !kept {
		if err := need(); err != nil {
			return nil, err
		}
		rewritten, err = instrument.Module(wasm)
	}
	if err == nil {
		c, err := compileIn(ctx, cache, funcs, rewritten, pages, false, false)
		if err == nil {
			if !kept {
				cache.keep(sum, rewritten)
			}
			cache.keepSkeleton(sum, rewritten)
			c.interruptible = true
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// The runtime refused the rewrite. A kept file that checks out
		// but is refused is not to be trusted either: rewrite once more.
		if kept {
			cache.drop(sum)
			if err := need(); err != nil {
				return nil, err
			}
			if rewritten, err := instrument.Module(wasm); err == nil {
				if c, err := compileIn(ctx, cache, funcs, rewritten, pages, false, false); err == nil {
					cache.keep(sum, rewritten)
					cache.keepSkeleton(sum, rewritten)
					c.interruptible = true
					return c, nil
				}
			}
		}
	}
	if err := need(); err != nil {
		return nil, err
	}
	bounded, err := instrument.BoundTables(wasm)
	if err != nil {
		return nil, err
	}
	return compileIn(ctx, cache, funcs, bounded, pages, true, false)
}

// compileIn compiles wasm in a runtime of its own; closeOnDone turns on the
// runtime's preemption; interpreted compiles it for wazero's interpreter,
// outside the cache, which keeps only the compiler's code.
func compileIn(ctx context.Context, cache *Cache, funcs []capability.Func, wasm []byte, pages uint32, closeOnDone, interpreted bool) (c *compiled, err error) {
	return compileWith(ctx, cache.cache, funcs, wasm, pages, closeOnDone, interpreted)
}

// compileWith is compileIn through the compilation cache cc.
func compileWith(ctx context.Context, cc wazero.CompilationCache, funcs []capability.Func, wasm []byte, pages uint32, closeOnDone, interpreted bool) (c *compiled, err error) {
	rc := wazero.NewRuntimeConfig().WithCompilationCache(cc)
	if interpreted {
		rc = wazero.NewRuntimeConfigInterpreter()
	}
	rc = rc.
		// Preemption, for a module not rewritten: a call's context
		// deadline stops a spinning guest, which otherwise ignores it and
		// stalls the host's GC.
		WithCloseOnContextDone(closeOnDone).
		// The memory tracker enforces the exact limit; wazero's maximum is
		// a backstop at twice that, in case an allocator is ever bypassed.
		WithMemoryLimitPages(min(2*pages, maxPages)).
		// A module's DWARF sections are the plugin's bytes, which the
		// runtime would parse with debug/dwarf at compile time; the rewrite
		// drops them anyway, since it moves the code they describe.
		WithDebugInfoEnabled(false)
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	defer func() {
		if err != nil {
			rt.Close(ctx)
		}
	}()
	if err := instantiateWASI(ctx, rt); err != nil {
		return nil, fmt.Errorf("instantiate WASI: %w", err)
	}
	if err := instantiateKernel(ctx, rt); err != nil {
		return nil, fmt.Errorf("instantiate kernel: %w", err)
	}
	if err := instantiateCapabilities(ctx, rt, funcs); err != nil {
		return nil, fmt.Errorf("instantiate capabilities: %w", err)
	}
	m, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, err
	}
	if !interpreted {
		releaseCodeBodies(m)
	}
	c = &compiled{rt: rt, module: m, hasMemory: len(m.ExportedMemories()) > 0, interpreted: interpreted, called: make(chan struct{})}
	// As go-sdk does for a WASI module (SPEC section 2.4): a reactor's
	// _initialize, or else __wasm_call_ctors, taking no parameters.
	exports := m.ExportedFunctions()
	for _, name := range []string{"_initialize", "__wasm_call_ctors"} {
		if f, ok := exports[name]; ok && len(f.ParamTypes()) == 0 {
			c.init = name
			break
		}
	}
	in, out := exports[directInputExport], exports[directOutputExport]
	c.direct = c.hasMemory && in != nil && out != nil &&
		slices.Equal(in.ParamTypes(), []api.ValueType{api.ValueTypeI32}) &&
		slices.Equal(in.ResultTypes(), []api.ValueType{api.ValueTypeI32}) &&
		len(out.ParamTypes()) == 0 &&
		slices.Equal(out.ResultTypes(), []api.ValueType{api.ValueTypeI64})
	if buf := exports[capabilityBufferExport]; c.direct && buf != nil && importsCapability(m) {
		c.capabilityBuffer = len(buf.ParamTypes()) == 0 && slices.Equal(buf.ResultTypes(), []api.ValueType{api.ValueTypeI64})
	}
	return c, nil
}

// importsCapability reports whether m imports a capability function: only
// then does an instance need the buffer of direct capability calls.
func importsCapability(m wazero.CompiledModule) bool {
	for _, f := range m.ImportedFunctions() {
		if module, _, _ := f.Import(); module == abi.CapabilityModule {
			return true
		}
	}
	return false
}
