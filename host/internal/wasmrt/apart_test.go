package wasmrt

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/loader"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// TestCompileBombs: a module past the static bounds is refused before
// anything compiles it, with the error naming the construct; one within
// them compiles; one that passes them but is slow or large to compile is
// stopped by the compile process's limits, and the host's own process
// never compiles it.
func TestCompileBombs(t *testing.T) {
	// 1000 ifs then 1000 locals read: 1.4 s of CPU and 116 MB to compile,
	// within every static bound.
	slow := wasmtest.Bomb(wasmtest.Sequence(1000, 1000))
	tests := []struct {
		name     string
		wasm     []byte
		limits   apartLimits // zero: the defaults
		want     error       // nil: compiles
		mentions string
	}{
		{"br_table targets", wasmtest.Bomb(wasmtest.BrTable(2, 10, 10_000, 0)), apartLimits{}, loader.ErrTooManyBranchTargets, "100000 targets"},
		{"nested loops", wasmtest.Bomb(wasmtest.Nested(0x03, 20_000)), apartLimits{}, loader.ErrNestingTooDeep, "20000 blocks"},
		{"nested ifs", wasmtest.Bomb(wasmtest.Nested(0x04, 20_000)), apartLimits{}, loader.ErrNestingTooDeep, "20000 blocks"},
		{"br_tables within the bound", wasmtest.Bomb(wasmtest.BrTable(2, 5, 4_000, 0)), apartLimits{}, nil, ""},
		{"blocks nested to the bound", wasmtest.Bomb(wasmtest.Nested(0x02, loader.MaxNesting)), apartLimits{}, nil, ""},
		{"a large function", wasmtest.Bomb(wasmtest.Straight(100_000)), apartLimits{}, nil, ""},
		{"slow past the CPU limit", slow, apartLimits{cpu: 300 * time.Millisecond, memory: CompileMemoryLimit * apartRaceMemory}, hosterr.ErrCompileLimit, "more than 300ms of CPU time"},
		{"large past the memory limit", slow, apartLimits{cpu: time.Minute, memory: 64 << 20}, hosterr.ErrCompileLimit, "more than 64 MiB of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			c, err := NewCache(dir)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close(ctx) })
			e := newEngine(t, c)
			e.interpretFirst = false // the compile process, at once
			e.apart = tt.limits
			e.testCompiling = func() { t.Log("compiling") }
			m, err := e.Compile(ctx, sha256.Sum256(tt.wasm), tt.wasm, testPages)
			if tt.want == nil {
				require.NoError(t, err)
				m.Release(ctx)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.ErrorIs(t, err, hosterr.ErrCompileLimit)
			assert.ErrorContains(t, err, tt.mentions)
			var files []string
			require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					files = append(files, path)
				}
				return err
			}))
			assert.Empty(t, files, "nothing compiled into the cache")
		})
	}
}

// TestPluginCompilesApart: a Go plugin the cache lacks is compiled in a
// compile process: under a limit the process cannot meet, it is refused.
// (Within the default limits, every test here that compiles a plugin into
// a new cache directory, as TestRewrittenModuleIsKept does, compiles it in
// such a process.)
func TestPluginCompilesApart(t *testing.T) {
	ctx := context.Background()
	wasm := buildWasm(t, "github.com/wasmhist/wasmhist/plugins/inmemory")
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	e := newEngine(t, c)
	e.interpretFirst = false // the compile process, at once
	e.apart = apartLimits{cpu: time.Minute, memory: 1 << 20}
	_, err = e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
	require.ErrorIs(t, err, hosterr.ErrCompileLimit)
	assert.ErrorContains(t, err, "more than 1 MiB of memory")
}

// TestCompileProcessOncePerModule: once a compile process compiled a
// module, later loads from the cache start none; a cache whose rewrite of
// the module was kept by a host that compiled it itself still gets one.
func TestCompileProcessOncePerModule(t *testing.T) {
	ctx := context.Background()
	wasm := wasmtest.Bomb(wasmtest.Straight(1000))
	sum := sha256.Sum256(wasm)
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	// Each load in an engine of its own, as a new process would.
	load := func(limits apartLimits) error {
		e := newEngine(t, c)
		e.interpretFirst = false // the compile process, at once
		e.apart = limits
		m, err := e.Compile(ctx, sum, wasm, testPages)
		if err == nil {
			m.Release(ctx)
		}
		return err
	}
	require.NoError(t, load(apartLimits{}))
	_, kept := c.kept(sum)
	require.True(t, kept, "the compile process kept the rewrite")

	// A compile process could not meet this limit.
	impossible := apartLimits{cpu: time.Minute, memory: 1 << 20}
	require.NoError(t, load(impossible), "loaded from the cache, without a compile process")

	require.NoError(t, os.Remove(c.apartPath(sum)))
	require.ErrorIs(t, load(impossible), hosterr.ErrCompileLimit, "a kept rewrite alone does not spare the compile process")
}

// TestRefusalInTheCompileProcessKeepsItsType: a module the compile process
// refuses within its limits is refused by the host with its own error,
// which callers can test for.
func TestRefusalInTheCompileProcessKeepsItsType(t *testing.T) {
	ctx := context.Background()
	table := wasmbin.AppendU32([]byte{1, 0x70, 0x00}, instrument.MaxTableEntries+1)
	wasm := wasmtest.Module{Funcs: []wasmtest.Func{{Export: "f"}}, Memory: true, Table: table}.Bytes()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	_, err = newEngine(t, c).Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
	require.ErrorIs(t, err, instrument.ErrTableTooLarge)
	assert.False(t, c.compiledApart(sha256.Sum256(wasm)), "no mark for a module refused")
}
