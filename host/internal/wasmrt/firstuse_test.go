package wasmrt

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/loader"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// TestFirstUseSwitchesToTheCompiler: a module the cache has not compiled
// is served on the interpreter at once; its compilation starts once a
// first call returned, into the cache; then new instances run the
// compiler's code, an instance of the interpreter is no longer current
// but finishes its calls, and the interpreter's code is freed with its
// last instance. The next engine on the cache compiles nothing.
func TestFirstUseSwitchesToTheCompiler(t *testing.T) {
	ctx := context.Background()
	wasm := hostileWasm(t, "misbehave")
	sum := sha256.Sum256(wasm)
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	e := newEngine(t, c)
	started := make(chan struct{})
	e.testBackground = func() bool { close(started); return true }

	m, err := e.Compile(ctx, sum, wasm, testPages)
	require.NoError(t, err)
	defer m.Release(ctx)
	require.True(t, m.Interpreted(), "a first use runs on the interpreter")
	first, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer first.Close(ctx)
	require.True(t, first.Interpreted())
	select {
	case <-started:
		t.Fatal("the compilation started before any call returned")
	default:
	}
	_, err = first.Call(ctx, abi.ExportDescribe, nil)
	require.NoError(t, err, "describe on the interpreter")

	<-m.Compiled()
	require.NoError(t, m.CompileErr())
	<-started
	assert.False(t, m.Interpreted(), "new instances run the compiler's code")
	assert.False(t, first.Current(), "the interpreter's instance is not current")
	interp := m.interp
	require.NotNil(t, interp)
	assert.False(t, interp.closed, "the interpreter's code lives while an instance does")
	_, err = first.Call(ctx, abi.ExportDescribe, nil)
	require.NoError(t, err, "the interpreter's instance finishes its calls")

	second, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer second.Close(ctx)
	assert.False(t, second.Interpreted())
	assert.True(t, second.Current())
	_, err = second.Call(ctx, abi.ExportDescribe, nil)
	require.NoError(t, err, "describe on the compiler's code")

	require.NoError(t, first.Close(ctx))
	assert.True(t, interp.closed, "the interpreter's code is freed with its last instance")

	assert.True(t, c.compiledApart(sum), "a compile process compiled it into the cache")
	warm, err := newEngine(t, c).Compile(ctx, sum, wasm, testPages)
	require.NoError(t, err)
	defer warm.Release(ctx)
	assert.False(t, warm.Interpreted(), "the next engine loads the compiled module from the cache")
}

// TestFirstUseCompiledWhenClosedBeforeAnyCall: an engine closed before
// the module's first call still compiles it, so that the next process
// finds it in the cache (what `wasmhist inspect` relies on to warm it).
func TestFirstUseCompiledWhenClosedBeforeAnyCall(t *testing.T) {
	ctx := context.Background()
	wasm := wasmtest.Module{Funcs: []wasmtest.Func{spinExport}, Memory: true}.Bytes()
	sum := sha256.Sum256(wasm)
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	e := NewEngine(c, nil)
	m, err := e.Compile(ctx, sum, wasm, testPages)
	require.NoError(t, err)
	require.True(t, m.Interpreted())
	require.NoError(t, e.Close(ctx))
	assert.True(t, c.compiledApart(sum), "Close waited for the compilation into the cache")
}

// TestFirstUseCompileLimit: a module whose compilation the compile process
// stops at its limits, in the background, stays on the interpreter, where
// it keeps working; the refusal is recorded, and the next engine refuses
// the module at once with ErrCompileLimit, spending no compile process.
func TestFirstUseCompileLimit(t *testing.T) {
	ctx := context.Background()
	// 1000 ifs then 1000 locals read: 1.4 s of CPU and 116 MB to compile
	// (TestCompileBombs), within every static bound.
	slow := wasmtest.Bomb(wasmtest.Sequence(1000, 1000), spinExport)
	sum := sha256.Sum256(slow)
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	e := newEngine(t, c)
	e.apart = apartLimits{cpu: 300 * time.Millisecond, memory: CompileMemoryLimit * apartRaceMemory}
	m, err := e.Compile(ctx, sum, slow, testPages)
	require.NoError(t, err)
	defer m.Release(ctx)
	require.True(t, m.Interpreted())
	call := func() error {
		in, err := m.NewInstance(ctx, testPages)
		require.NoError(t, err)
		defer in.Close(ctx)
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err = in.Call(dctx, "spin", nil)
		return err
	}
	require.ErrorIs(t, call(), hosterr.ErrTimeout, "the first call, on the interpreter")

	<-m.Compiled()
	require.ErrorIs(t, m.CompileErr(), hosterr.ErrCompileLimit)
	assert.True(t, m.Interpreted(), "it stays on the interpreter")
	require.ErrorIs(t, call(), hosterr.ErrTimeout, "a later call, on the interpreter")

	next := newEngine(t, c)
	next.apart = apartLimits{cpu: time.Minute, memory: CompileMemoryLimit * apartRaceMemory}
	_, err = next.Compile(ctx, sum, slow, testPages)
	require.ErrorIs(t, err, hosterr.ErrCompileLimit)
	assert.ErrorContains(t, err, "more than 300ms of CPU time", "the refusal recorded")
}

// TestFirstUseRefusesCompileBombs: a module past the static bounds on its
// code is refused on its first use too, before the interpreter or the
// compiler sees it, whether the rewrite checks it as it reads the code or,
// for a module it does not rewrite (no memory), the whole check runs.
func TestFirstUseRefusesCompileBombs(t *testing.T) {
	tests := []struct {
		name     string
		f        wasmtest.Func
		memory   bool
		want     error
		mentions string
	}{
		{"br_table targets, rewritten", wasmtest.BrTable(2, 10, 10_000, 0), true, loader.ErrTooManyBranchTargets, "function 0: "},
		{"nested loops, rewritten", wasmtest.Nested(0x03, 20_000), true, loader.ErrNestingTooDeep, "20000 blocks"},
		{"br_table targets, not rewritten", wasmtest.BrTable(2, 10, 10_000, 0), false, loader.ErrTooManyBranchTargets, "100000 targets"},
		{"nested ifs, not rewritten", wasmtest.Nested(0x04, 20_000), false, loader.ErrNestingTooDeep, "function 0: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			wasm := wasmtest.Module{Funcs: []wasmtest.Func{tt.f}, Memory: tt.memory}.Bytes()
			_, rerr := instrument.Module(wasm)
			require.Equal(t, !tt.memory, errors.Is(rerr, instrument.ErrUnsupported), "rewritten: %v", rerr)
			c, err := NewCache(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { c.Close(ctx) })
			e := newEngine(t, c)
			e.testBackground = func() bool {
				t.Error("a module past the static bounds was compiled")
				return false
			}
			_, err = e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
			require.ErrorIs(t, err, tt.want)
			require.ErrorIs(t, err, hosterr.ErrCompileLimit)
			assert.ErrorContains(t, err, tt.mentions)
		})
	}
}
