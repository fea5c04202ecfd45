package wasmrt

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

const testPages = 512

// echoFunc is the test capability every test engine binds.
var echoFunc = capability.Func{Capability: "echo", Name: "echo", Call: echoCall}

// userCache opens the compilation cache the host uses by default, so that
// the package's tests compile each plugin once across runs.
func userCache(t testing.TB) *Cache {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	c, err := NewCache(CacheDir(filepath.Join(base, "wasmhist", "compile")))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// newEngine returns an engine closed with the test.
func newEngine(t testing.TB, c *Cache) *Engine {
	t.Helper()
	e := NewEngine(c, []capability.Func{echoFunc})
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// engineKinds are the code a module runs on: the compiler's, and the
// interpreter's, which serves a module's first use while the compiler
// works (Engine.firstUse). Every limit holds alike on both.
var engineKinds = []string{"compiler", "interpreter"}

// compileOn compiles wasm for kind: "compiler" as a module is loaded
// once the cache holds it, "interpreter" as its first use is served, with
// no compilation to replace it.
func compileOn(t testing.TB, kind string, wasm []byte, pages uint32) *Module {
	t.Helper()
	ctx := context.Background()
	var e *Engine
	if kind == "interpreter" {
		c, err := NewCache(t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close(ctx) })
		e = newEngine(t, c)
		e.testBackground = func() bool { return false }
	} else {
		e = newEngine(t, userCache(t))
		e.interpretFirst = false
	}
	m, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, pages)
	require.NoError(t, err)
	t.Cleanup(func() { m.Release(ctx) })
	require.Equal(t, kind == "interpreter", m.Interpreted(), "runs on the %s", kind)
	return m
}

func hostileWasm(t testing.TB, name string) []byte {
	t.Helper()
	return buildWasm(t, "../../testdata/hostile/"+name)
}

// buildWasm builds the plugin at pkg (a package path or directory).
func buildWasm(t testing.TB, pkg string) []byte {
	t.Helper()
	path := sdktest.BuildPlugin(t, pkg)
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	return wasm
}

func compileHostile(t *testing.T, name string) *Module {
	t.Helper()
	return compileOn(t, "compiler", hostileWasm(t, name), testPages)
}

// TestCallFailures: each way a call fails gives its error, on the
// compiler's code and on the interpreter's.
func TestCallFailures(t *testing.T) {
	for _, kind := range engineKinds {
		t.Run(kind, func(t *testing.T) { testCallFailures(t, compileOn(t, kind, hostileWasm(t, "misbehave"), testPages)) })
	}
}

func testCallFailures(t *testing.T, m *Module) {
	tests := []struct {
		name string
		word string
		want error
	}{
		{"loop", "loop", hosterr.ErrTimeout},
		{"hog", "hog", hosterr.ErrMemoryLimit},
		{"panic", "panic", hosterr.ErrTrap},
		{"plugin error", "error", abi.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			// A small limit keeps the hog's work short.
			in, err := m.NewInstance(ctx, 128)
			require.NoError(t, err)
			defer in.Close(ctx)
			_, err = in.Call(ctx, abi.ExportDescribe, nil)
			require.NoError(t, err, "describe")
			// Only the spinning case needs a short deadline; the others get
			// room so that a loaded machine cannot turn them into timeouts.
			d := 5 * time.Second
			if tt.want == hosterr.ErrTimeout {
				d = 300 * time.Millisecond
			}
			cctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			_, err = in.Call(cctx, abi.ExportProvide, []byte(`{"x":"hostile:`+tt.word+`"}`))
			require.ErrorIs(t, err, tt.want)
			t.Logf("%v (memory %d)", err, in.MemoryBytes())
		})
	}
}

// TestGuestEntropyAndClock checks that instances draw real randomness and
// see the real time: wazero's defaults (a fixed seed, a fake clock) would
// give every instance of a plugin the same "random" session keys.
func TestGuestEntropyAndClock(t *testing.T) {
	m := compileHostile(t, "misbehave")
	ctx := context.Background()
	seen := map[string]bool{}
	for range 2 {
		in, err := m.NewInstance(ctx, testPages)
		require.NoError(t, err)
		_, err = in.Call(ctx, "provide", []byte(`{"request_messages":["hostile:entropy"]}`))
		in.Close(ctx)
		var pe *abi.Error
		require.ErrorAs(t, err, &pe, "want the plugin's report as an error")
		random, unix, ok := strings.Cut(pe.Message, " ")
		require.True(t, ok, "unexpected report %q", pe.Message)
		require.False(t, seen[random], "two instances drew the same random bytes %s", random)
		seen[random] = true
		sec, err := strconv.ParseInt(unix, 10, 64)
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now(), time.Unix(sec, 0), time.Hour, "guest clock")
	}
}

// TestCompileCancelledWaiterDoesNotFailOthers: the compilation serves every
// loader waiting for it, so the one that started it giving up must not fail
// the one that joined.
func TestCompileCancelledWaiterDoesNotFailOthers(t *testing.T) {
	wasm := hostileWasm(t, "misbehave")
	// A cold cache, so that the compile is long and really in progress.
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(context.Background())
	e := NewEngine(c, []capability.Func{echoFunc})
	defer e.Close(context.Background())
	compiling, release, joined := make(chan struct{}), make(chan struct{}), make(chan struct{})
	e.testCompiling = func() { close(compiling); <-release }
	e.testJoined = func() { close(joined) }

	first, cancelFirst := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		m, err := e.Compile(first, sha256.Sum256(wasm), wasm, testPages)
		if err == nil {
			m.Release(context.Background())
		}
		firstErr <- err
	}()
	<-compiling
	second := make(chan error, 1)
	go func() {
		m, err := e.Compile(context.Background(), sha256.Sum256(wasm), wasm, testPages)
		if err == nil {
			_, err = m.NewInstance(context.Background(), testPages)
			m.Release(context.Background())
		}
		second <- err
	}()
	<-joined
	cancelFirst()
	require.ErrorIs(t, <-firstErr, context.Canceled)
	close(release)
	require.NoError(t, <-second, "the loader that joined the compilation")
}

// TestEngineCloseFreesModules: Close frees every module, in use or not, and
// refuses later compiles.
func TestEngineCloseFreesModules(t *testing.T) {
	ctx := context.Background()
	wasm := hostileWasm(t, "misbehave")
	e := NewEngine(userCache(t), nil)
	m, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
	require.NoError(t, err)
	m2, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
	require.NoError(t, err)
	assert.Same(t, m, m2, "two compiles of one module share it")
	require.NoError(t, e.Close(ctx))
	_, err = m.NewInstance(ctx, testPages)
	require.Error(t, err, "an instance of a module freed by Close")
	_, err = e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
	require.True(t, errors.Is(err, ErrClosed), "compile after Close: %v", err)
}
