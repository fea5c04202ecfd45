//go:build linux

package wasmrt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
)

// mappedFile returns the file mapped at address p, "" for an anonymous
// mapping.
func mappedFile(t *testing.T, p unsafe.Pointer) string {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	at := uintptr(p)
	for _, l := range strings.Split(string(maps), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(l, "%x-%x", &lo, &hi); err != nil || at < lo || at >= hi {
			continue
		}
		if f := strings.Fields(l); len(f) >= 6 {
			return f[5]
		}
		return ""
	}
	t.Fatalf("nothing mapped at %#x", at)
	return ""
}

// TestMapCodePinned checks that executableOf still finds wazero's machine
// code (it reaches it through wazero's unexported fields, as of the go.mod
// version v1.9.0), that mapText maps it from the cache's file, and that the
// module then instantiates and runs.
func TestMapCodePinned(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(c.cache))
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, addModule)
	require.NoError(t, err)
	code, _ := executableOf(m)
	require.NotEmpty(t, code,
		"executableOf found no machine code: wazero's compiledModule.module.ID or compiledEngine.compiledModules[id].executable moved (the code knows github.com/tetratelabs/wazero v1.9.0)")
	path := c.textPath(code)
	require.NoError(t, writePaged(path, code))
	_, ok := mapText(path, code)
	require.True(t, ok)
	require.Equal(t, path, mappedFile(t, unsafe.Pointer(&code[0])))
	for range 2 {
		in, err := rt.InstantiateModule(ctx, m, wazero.NewModuleConfig().WithName(""))
		require.NoError(t, err)
		got, err := in.ExportedFunction("add").Call(ctx, 2, 3)
		require.NoError(t, err)
		require.Equal(t, []uint64{5}, got)
		require.NoError(t, in.Close(ctx))
	}
}

// TestMapCodeRefusesOtherBytes: a file of the cache that does not hold
// the module's code, byte for byte, is never mapped; mapCode writes it
// again.
func TestMapCodeRefusesOtherBytes(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(c.cache))
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, addModule)
	require.NoError(t, err)
	code, _ := executableOf(m)
	require.NotEmpty(t, code)
	path := c.textPath(code)
	other := bytes.Clone(code)
	other[len(other)/2] ^= 0xff
	require.NoError(t, writePaged(path, other))
	_, ok := mapText(path, code)
	require.False(t, ok, "a file holding other bytes was mapped")
	require.Equal(t, "", mappedFile(t, unsafe.Pointer(&code[0])))
	in, err := rt.InstantiateModule(ctx, m, wazero.NewModuleConfig().WithName(""))
	require.NoError(t, err)
	got, err := in.ExportedFunction("add").Call(ctx, 2, 3)
	require.NoError(t, err)
	require.Equal(t, []uint64{5}, got)
	require.NoError(t, in.Close(ctx))
}

// imageModule returns a module that defines and exports a memory of two
// pages, with two active data segments: 70,000 bytes at offset 1024 and
// 100 at 69,536 (within the first), and the memory they make.
func imageModule() (wasm, want []byte) {
	first, second := make([]byte, 70000), make([]byte, 100)
	for i := range first {
		first[i] = byte(i*7 + 1)
	}
	for i := range second {
		second[i] = 0xee
	}
	section := func(id byte, payload []byte) []byte {
		return append(binary.AppendUvarint([]byte{id}, uint64(len(payload))), payload...)
	}
	segment := func(offset int32, b []byte) []byte {
		s := append([]byte{0x00, opI32Const}, sleb(offset)...)
		s = append(s, 0x0b)
		s = binary.AppendUvarint(s, uint64(len(b)))
		return append(s, b...)
	}
	wasm = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	wasm = append(wasm, section(5, []byte{0x01, 0x00, 0x02})...)                                     // memory: min 2 pages
	wasm = append(wasm, section(7, []byte{0x01, 0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00})...) // export "memory"
	data := append([]byte{0x02}, segment(1024, first)...)
	data = append(data, segment(69536, second)...)
	wasm = append(wasm, section(11, data)...)
	want = make([]byte, 1024+len(first))
	copy(want[1024:], first)
	copy(want[69536:], second)
	return wasm, want
}

// sleb encodes v as a signed LEB128.
func sleb(v int32) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// compileImage compiles imageModule with cache c and moves its data
// segments into an image; before runs first, given the image's path.
func compileImage(t *testing.T, c *Cache, before func(path string, want []byte)) (*compiled, []byte, string) {
	t.Helper()
	ctx := context.Background()
	wasm, want := imageModule()
	comp, err := compileWith(ctx, c.cache, nil, wasm, 4, false, false)
	require.NoError(t, err)
	t.Cleanup(func() { comp.Close(ctx) })
	path := c.imagePath(want)
	if before != nil {
		before(path, want)
	}
	c.share(comp)
	return comp, want, path
}

// TestMemoryImagePinned checks that dataImage still finds wazero's data
// segments (through its unexported fields, as of the go.mod version
// v1.9.0) and lays them out as instantiation would, and that the module
// keeps none once they moved to the image.
func TestMemoryImagePinned(t *testing.T) {
	ctx := context.Background()
	wasm, want := imageModule()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, wasm)
	require.NoError(t, err)
	img, drop, ok := dataImage(m)
	require.True(t, ok, "dataImage found no data segments: wazero's compiledModule.module.DataSection moved (the code knows github.com/tetratelabs/wazero v1.9.0)")
	require.True(t, bytes.Equal(want, img), "the image is not the memory the segments make")
	drop()
	img, _, ok = dataImage(m)
	require.True(t, ok)
	require.Equal(t, len(img), bytes.Count(img, []byte{0}), "the segments are still in the module")
}

// TestMemoryImageCopyOnWrite: every instance starts from the image, and
// what one instance writes into it is its own: no other instance, earlier
// or later, and not the file, sees it.
func TestMemoryImageCopyOnWrite(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	comp, want, path := compileImage(t, c, nil)
	require.NotNil(t, comp.image, "the data segments moved to an image")

	a, err := comp.newInstance(ctx, 4)
	require.NoError(t, err)
	defer a.mod.Close(ctx)
	memA, ok := a.mod.Memory().Read(0, uint32(len(want)))
	require.True(t, ok)
	require.True(t, bytes.Equal(want, memA), "the instance's memory is not the image")
	require.Equal(t, path, mappedFile(t, unsafe.Pointer(&memA[0])), "the instance's memory maps the image")
	require.True(t, a.mod.Memory().Write(1024, []byte("written by a")))

	b, err := comp.newInstance(ctx, 4)
	require.NoError(t, err)
	defer b.mod.Close(ctx)
	memB, ok := b.mod.Memory().Read(0, uint32(len(want)))
	require.True(t, ok)
	require.True(t, bytes.Equal(want, memB), "an instance sees another's write")
	require.True(t, b.mod.Memory().Write(2000, []byte("written by b")))

	got, ok := a.mod.Memory().Read(1024, 12)
	require.True(t, ok)
	require.Equal(t, "written by a", string(got))
	got, ok = a.mod.Memory().Read(2000, 12)
	require.True(t, ok)
	require.Equal(t, want[2000:2012], got, "an instance sees another's write")
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, file), "an instance wrote into the image's file")
}

// TestMemoryImageRefusesOtherBytes: an image file that does not hold the
// module's data, byte for byte, is written again before any instance maps
// it.
func TestMemoryImageRefusesOtherBytes(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	comp, want, path := compileImage(t, c, func(path string, want []byte) {
		other := bytes.Clone(want)
		other[1500] ^= 0xff
		require.NoError(t, writePaged(path, other))
	})
	require.NotNil(t, comp.image)
	in, err := comp.newInstance(ctx, 4)
	require.NoError(t, err)
	defer in.mod.Close(ctx)
	got, ok := in.mod.Memory().Read(0, uint32(len(want)))
	require.True(t, ok)
	require.True(t, bytes.Equal(want, got), "the instance's memory is not the module's data")
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, file), "the image's file was not written again")
}

// TestMemoryImageLimits: a memory limit below the module's initial memory
// is refused as before, and a memory that is not the host's mapping gets
// the image read into it.
func TestMemoryImageLimits(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	comp, want, _ := compileImage(t, c, nil)
	require.NotNil(t, comp.image)
	_, err = comp.newInstance(ctx, 1)
	require.True(t, errors.Is(err, hosterr.ErrMemoryLimit), "got %v", err)

	heap := make([]byte, 2*PageSize)
	require.True(t, comp.image.load(heap, false))
	require.True(t, bytes.Equal(want, heap[:len(want)]), "the image was not read into the memory")
	require.False(t, comp.image.load(make([]byte, len(want)-1), false), "an image larger than the memory")
}

// TestPluginBuildShared: a Go plugin's build runs on the cache's copy of
// its code and its instances on the cache's image, for each module of the
// build (here two memory limits); code mapped once is not mapped again
// (wazero shares a module's code between runtimes on one compilation
// cache, and it may be running).
func TestPluginBuildShared(t *testing.T) {
	ctx := context.Background()
	wasm := pluginWasm(t)
	first := compileOn(t, "compiler", wasm, testPages)
	second := compileOn(t, "compiler", wasm, 2*testPages)
	for _, m := range []*Module{first, second} {
		code, owner := executableOf(m.code().module)
		require.NotEmpty(t, code)
		require.Contains(t, mappedFile(t, unsafe.Pointer(&code[0])), "/text/", "the code is the cache's copy")
		require.False(t, firstMapping(code, owner), "mapped again")
		require.NotNil(t, m.code().image, "the data segments moved to an image")
		in, err := m.NewInstance(ctx, testPages)
		require.NoError(t, err)
		_, err = in.Call(ctx, "describe", nil)
		require.NoError(t, err)
		require.NoError(t, in.Close(ctx))
	}
}

// TestFirstMapping: code is mapped once per owner at an address, and an
// owner wazero allocates at the heap address of a collected one, for code
// it maps at the address of freed code, is a new owner. Compared by
// address, the new code was taken for code mapped already, running, and
// left in wazero's mapping.
func TestFirstMapping(t *testing.T) {
	code := make([]byte, 1)
	escape(code) // a stack that grows would move it
	// Large enough for a span of its own: the heap hands a freed span's
	// pages out again first-fit, where it reuses small slots in no order
	// a test can wait for.
	type owner [64 << 10]byte
	first := new(owner)
	escape(first) // wazero's owners are on the heap
	require.True(t, firstMapping(code, unsafe.Pointer(first)))
	require.False(t, firstMapping(code, unsafe.Pointer(first)), "the same code twice")
	other := new(owner)
	escape(other)
	require.True(t, firstMapping(code, unsafe.Pointer(other)), "another owner's code at the same address")
	runtime.KeepAlive(first)
	first, other = nil, nil
	require.False(t, firstMapping(code, nil), "code without an owner")

	// Rounds: an owner's code is mapped, the owner collected, and owners
	// allocated until one comes at its address.
	var kept []*owner // so that each try takes fresh memory
	for round := 0; ; round++ {
		require.Less(t, round, 100, "the heap never gave a collected owner's address again")
		o := new(owner)
		escape(o)
		at := uintptr(unsafe.Pointer(o))
		require.True(t, firstMapping(code, unsafe.Pointer(o)))
		o = nil
		runtime.GC()
		runtime.GC()
		var reused *owner
		for range 64 {
			n := new(owner)
			escape(n)
			if uintptr(unsafe.Pointer(n)) == at {
				reused = n
				break
			}
			kept = append(kept, n)
		}
		if reused != nil {
			require.True(t, firstMapping(code, unsafe.Pointer(reused)), "a new owner at a collected owner's address (round %d)", round)
			break
		}
	}
	runtime.KeepAlive(kept)
}

var escaped any

//go:noinline
func escape(p any) { escaped = p; escaped = nil }

// TestMapCodeOnlyItsLoadsEntry: what a load did with the code of the
// entry it read applies to that code only. Code wazero compiled, or read
// without the load seeing it, is compared with the text file and mapped
// from it: taken for code mapped as it was read, wazero's own pages were
// dropped, which zeroes them, and the next call ran zeros into a fault.
func TestMapCodeOnlyItsLoadsEntry(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(c.cache))
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, pluginWasm(t))
	require.NoError(t, err)
	code, _ := executableOf(m)
	require.GreaterOrEqual(t, len(code), minMappedCode)
	want := bytes.Clone(code)
	at := uintptr(unsafe.Pointer(&code[0]))
	// Another load's code, mapped as it was read, at the same address.
	stale := &entryCode{at: at, n: len(code) - 4096, mapped: true}
	require.Equal(t, code, c.mapCode(m, stale))
	require.Equal(t, want, code, "wazero's pages were dropped")
	require.Contains(t, mappedFile(t, unsafe.Pointer(&code[0])), "/text/", "the code is the cache's copy")
}
