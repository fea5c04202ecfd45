package wasmrt

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/wasmhist/wasmhist/host/internal/modpin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// adder exports add(i32, i32) i32 and a memory, which the rewrite needs.
var adder = wasmtest.Module{Funcs: []wasmtest.Func{{
	Params:  []byte{wasmtest.I32, wasmtest.I32},
	Results: []byte{wasmtest.I32},
	Code:    []byte{0x20, 0x00, 0x20, 0x01, 0x6a}, // local.get 0, local.get 1, i32.add
	Export:  "add",
}}, Memory: true}.Bytes()

// TestSkeletonEntryNamesPinned pins what skeleton.go knows of wazero: the
// name of a module's entry in the cache directory, and that a module
// without function bodies whose entry holds another module's code runs
// that code.
func TestSkeletonEntryNamesPinned(t *testing.T) {
	const dep = "github.com/tetratelabs/wazero"
	version, err := modpin.Version(".", dep)
	require.NoError(t, err)
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(c.cache))
	_, err = rt.CompileModule(ctx, addModule)
	require.NoError(t, err)
	require.NoError(t, rt.Close(ctx))

	dir := c.codeDir()
	require.NotEmpty(t, dir, "%s %s: no single wazero-*-%s-%s directory in the cache", dep, version, "GOARCH", "GOOS")
	full, ok := entry(dir, codeID(addModule))
	require.True(t, ok, "%s %s: the compiled module is not where skeleton.go's entryName puts it", dep, version)

	skel, err := skeletonOf(addModule)
	require.NoError(t, err)
	// Linked where keepSkeleton links it: under the skeleton's entry, for
	// the CPU bits of the module's own entry.
	for cpu := range uint64(1 << cpuBits) {
		if entryName(codeID(addModule), cpu) == filepath.Base(full) {
			require.NoError(t, os.Link(full, filepath.Join(dir, entryName(codeID(skel), cpu))))
		}
	}
	fresh, err := NewCache(c.dir)
	require.NoError(t, err)
	defer fresh.Close(ctx)
	rt = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(fresh.cache))
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, skel)
	require.NoError(t, err)
	in, err := rt.InstantiateModule(ctx, m, wazero.NewModuleConfig().WithName(""))
	require.NoError(t, err)
	got, err := in.ExportedFunction("add").Call(ctx, 2, 3)
	require.NoError(t, err, "%s %s: the skeleton ran its own stubs, not the cached code", dep, version)
	require.Equal(t, []uint64{5}, got)
}

// TestSkeletonNeverRunsStubs: a load takes the skeleton only when wazero
// found the rewrite's code under its entry. Whatever happened to the entry
// or the skeleton, the module loads and runs its own code (the stubs would
// trap at unreachable).
func TestSkeletonNeverRunsStubs(t *testing.T) {
	ctx := context.Background()
	sum := sha256.Sum256(adder)
	// skeletonEntry is the cache file the kept skeleton's code is read from.
	skeletonEntry := func(t *testing.T, c *Cache) string {
		f, err := os.ReadFile(c.skeletonPath(sum))
		require.NoError(t, err)
		p, ok := entry(c.codeDir(), codeID(f[:len(f)-crcSize]))
		require.True(t, ok, "the skeleton's entry")
		return p
	}
	tests := []struct {
		name         string
		damage       func(t *testing.T, c *Cache)
		wantSkeleton bool
		// healed: the load after next uses the skeleton again. A damaged
		// entry makes wazero refuse the rewrite itself (its checksum), so
		// the module is loaded without it, and nothing is kept again.
		healed bool
	}{
		{"intact", func(*testing.T, *Cache) {}, true, true},
		{"entry removed", func(t *testing.T, c *Cache) {
			require.NoError(t, os.Remove(skeletonEntry(t, c)))
		}, false, true},
		{"entry written by another wazero", func(t *testing.T, c *Cache) {
			// The header: "WAZEVO", the version's length, the version.
			overwrite(t, skeletonEntry(t, c), 7, []byte("v0.0.0"))
		}, false, true},
		{"entry's code damaged", func(t *testing.T, c *Cache) {
			p := skeletonEntry(t, c)
			fi, err := os.Stat(p)
			require.NoError(t, err)
			overwrite(t, p, fi.Size()-8, []byte{0xde, 0xad})
		}, false, false},
		{"skeleton damaged", func(t *testing.T, c *Cache) {
			overwrite(t, c.skeletonPath(sum), 8, []byte{0xff})
		}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := NewCache(dir)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close(ctx) })
			// Each load with a cache and an engine of its own, as a new
			// process would: nothing compiled in memory.
			load := func() *compiled {
				c, err := NewCache(dir)
				require.NoError(t, err)
				t.Cleanup(func() { c.Close(ctx) })
				e := newEngine(t, c)
				m, err := e.Compile(ctx, sum, adder, testPages)
				require.NoError(t, err)
				t.Cleanup(func() { m.Release(ctx) })
				in, err := m.NewInstance(ctx, testPages)
				require.NoError(t, err)
				defer in.Close(ctx)
				got, err := in.mod.ExportedFunction("add").Call(ctx, 2, 3)
				require.NoError(t, err, "the module ran stubs")
				require.Equal(t, []uint64{5}, got)
				// A first use runs on the interpreter; what is kept comes
				// from the compilation that follows its first call, which
				// Instance.Call reports and this direct call does not.
				in.code.returned()
				<-m.Compiled()
				require.NoError(t, m.CompileErr())
				return m.code()
			}
			first := load()
			require.False(t, first.skeleton, "first load: nothing kept yet")
			require.True(t, first.interruptible, "the module was rewritten")
			require.FileExists(t, c.skeletonPath(sum), "the skeleton is kept after the first load")
			tt.damage(t, c)
			require.Equal(t, tt.wantSkeleton, load().skeleton, "second load from the skeleton")
			require.Equal(t, tt.healed, load().skeleton, "the load after next from the skeleton")
		})
	}
}

// TestSkeletonIsBoundToItsCode: two modules that differ only in their code
// have skeletons of their own, so neither ever runs the other's code.
func TestSkeletonIsBoundToItsCode(t *testing.T) {
	ctx := context.Background()
	subtracter := wasmtest.Module{Funcs: []wasmtest.Func{{
		Params:  []byte{wasmtest.I32, wasmtest.I32},
		Results: []byte{wasmtest.I32},
		Code:    []byte{0x20, 0x00, 0x20, 0x01, 0x6b}, // local.get 0, local.get 1, i32.sub
		Export:  "add",
	}}, Memory: true}.Bytes()
	dir := t.TempDir()
	run := func(wasm []byte) (uint64, bool) {
		c, err := NewCache(dir)
		require.NoError(t, err)
		defer c.Close(ctx)
		e := NewEngine(c, nil)
		defer e.Close(ctx)
		m, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
		require.NoError(t, err)
		in, err := m.NewInstance(ctx, testPages)
		require.NoError(t, err)
		defer in.Close(ctx)
		got, err := in.mod.ExportedFunction("add").Call(ctx, 5, 3)
		require.NoError(t, err)
		in.code.returned() // what Instance.Call reports: the compilation follows
		<-m.Compiled()
		require.NoError(t, m.CompileErr())
		return got[0], m.code().skeleton
	}
	for _, want := range []bool{false, true} {
		got, skeleton := run(adder)
		require.Equal(t, uint64(8), got, "5 + 3")
		require.Equal(t, want, skeleton)
		got, skeleton = run(subtracter)
		require.Equal(t, uint64(2), got, "5 - 3")
		require.Equal(t, want, skeleton)
	}
}

// TestSkeletonHammer: loads from caches of their own on one directory, as
// processes would, while others remove the skeleton's entry and keep it
// again; every load runs the module's own code.
func TestSkeletonHammer(t *testing.T) {
	ctx := context.Background()
	sum := sha256.Sum256(adder)
	dir := t.TempDir()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 8 {
				c, err := NewCache(dir)
				if !assert.NoError(t, err) {
					return
				}
				if (g+i)%3 == 0 {
					if f, err := os.ReadFile(c.skeletonPath(sum)); err == nil && len(f) > crcSize {
						if p, ok := entry(c.codeDir(), codeID(f[:len(f)-crcSize])); ok {
							os.Remove(p)
						}
					}
				}
				e := NewEngine(c, nil)
				m, err := e.Compile(ctx, sum, adder, testPages)
				if assert.NoError(t, err) {
					in, err := m.NewInstance(ctx, testPages)
					if assert.NoError(t, err) {
						got, err := in.mod.ExportedFunction("add").Call(ctx, 2, 3)
						assert.NoError(t, err, "the module ran stubs")
						assert.Equal(t, []uint64{5}, got)
						in.Close(ctx)
					}
					m.Release(ctx)
				}
				e.Close(ctx)
				c.Close(ctx)
			}
		})
	}
	wg.Wait()
}

// TestCompileFromReadsOnlyWhatItNeeds: a load from the skeleton, or from
// the kept rewrite, never reads the module's bytes; one that compiles them
// reads them once, and fails with the read's error if the read fails.
func TestCompileFromReadsOnlyWhatItNeeds(t *testing.T) {
	ctx := context.Background()
	sum := sha256.Sum256(adder)
	errGone := errors.New("the plugin file went away")
	tests := []struct {
		name      string
		change    func(t *testing.T, c *Cache)
		readFails bool
		wantReads int
	}{
		{"skeleton", func(*testing.T, *Cache) {}, false, 0},
		{"skeleton, the read failing", func(*testing.T, *Cache) {}, true, 0},
		{"kept rewrite", func(t *testing.T, c *Cache) { require.NoError(t, os.Remove(c.skeletonPath(sum))) }, false, 0},
		{"neither", func(t *testing.T, c *Cache) {
			require.NoError(t, os.Remove(c.skeletonPath(sum)))
			require.NoError(t, os.Remove(c.rewritePath(sum)))
		}, false, 1},
		{"neither, the read failing", func(t *testing.T, c *Cache) {
			require.NoError(t, os.Remove(c.skeletonPath(sum)))
			require.NoError(t, os.Remove(c.rewritePath(sum)))
		}, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// A first process compiles the module and keeps its skeleton.
			c, err := NewCache(dir)
			require.NoError(t, err)
			e := newEngine(t, c)
			m, err := e.Compile(ctx, sum, adder, testPages)
			require.NoError(t, err)
			in, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			in.code.returned() // what Instance.Call reports: the compilation follows
			<-m.Compiled()
			require.NoError(t, m.CompileErr())
			require.NoError(t, in.Close(ctx))
			require.NoError(t, e.Close(ctx))
			require.NoError(t, c.Close(ctx))
			require.FileExists(t, c.skeletonPath(sum))
			tt.change(t, c)

			c, err = NewCache(dir)
			require.NoError(t, err)
			t.Cleanup(func() { c.Close(ctx) })
			reads := 0
			m, err = newEngine(t, c).CompileFrom(ctx, sum, func() ([]byte, error) {
				reads++
				if tt.readFails {
					return nil, errGone
				}
				return adder, nil
			}, testPages)
			require.Equal(t, tt.wantReads, reads)
			if tt.readFails && tt.wantReads > 0 {
				require.ErrorIs(t, err, errGone)
				return
			}
			require.NoError(t, err)
			defer m.Release(ctx)
			in, err = m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			got, err := in.mod.ExportedFunction("add").Call(ctx, 2, 3)
			require.NoError(t, err)
			require.Equal(t, []uint64{5}, got)
		})
	}
}

// TestKeepSkeletonAgainLeavesNoLink: keeping the skeleton of code whose
// skeleton entry already links the same file (another load kept it, or a
// load that compiled again) leaves no temporary link behind: renaming a
// link over another of the same file does nothing.
func TestKeepSkeletonAgainLeavesNoLink(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	sum := sha256.Sum256(adder)
	e := NewEngine(c, nil)
	defer e.Close(ctx)
	m, err := e.Compile(ctx, sum, adder, testPages)
	require.NoError(t, err)
	defer m.Release(ctx)
	m.code().returned() // what a call reports: the compilation follows
	<-m.Compiled()
	require.NoError(t, m.CompileErr())
	rewritten, ok := c.kept(sum)
	require.True(t, ok, "the compile kept its rewrite")
	temporaries := func() []string {
		names, err := filepath.Glob(filepath.Join(c.codeDir(), "*.skeleton.tmp"))
		require.NoError(t, err)
		return names
	}
	require.Empty(t, temporaries())
	for range 2 {
		c.keepSkeleton(sum, rewritten)
		assert.Empty(t, temporaries())
	}
}
