package instrument_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// segment is an active data segment of memory 0 at offset off.
type segment struct {
	off  int32
	init []byte
}

// dataBody encodes segments as a data section body.
func dataBody(segs ...segment) []byte {
	b := wasmbin.AppendU32(nil, uint32(len(segs)))
	for _, s := range segs {
		b = append(b, 0x00, 0x41)
		b = wasmbin.AppendS32(b, s.off)
		b = append(b, 0x0b)
		b = append(wasmbin.AppendU32(b, uint32(len(s.init))), s.init...)
	}
	return b
}

// dataModule is a module with one page of memory of its own and the data
// section body data.
func dataModule(data []byte) []byte {
	return wasmtest.Module{Funcs: []wasmtest.Func{sum}, Memory: true,
		Extra: []wasmtest.Section{{ID: 11, Body: data}}}.Bytes()
}

// section returns the body of the section id of wasm, or nil.
func section(t *testing.T, wasm []byte, id byte) []byte {
	t.Helper()
	secs, err := wasmbin.Sections(wasm)
	require.NoError(t, err)
	for _, s := range secs {
		if s.ID == id {
			return s.Body
		}
	}
	return nil
}

// memoryAfter instantiates wasm as it is and returns its memory, or the
// instantiation's error.
func memoryAfter(t *testing.T, wasm []byte) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		return nil, err
	}
	mem, ok := mod.Memory().Read(0, mod.Memory().Size())
	require.True(t, ok)
	return slices.Clone(mem), nil
}

// TestDataSegmentsAreJoined: segments with up to 64 bytes between them
// become one, in the order of their offsets, whatever their order in the
// section; the memory an instance starts with is the same.
func TestDataSegmentsAreJoined(t *testing.T) {
	wasm := dataModule(dataBody(
		segment{100, []byte("cd")},
		segment{10, []byte("ab")},
		segment{102, nil},
		segment{166, []byte("ef")}, // 64 bytes after "cd": joined
		segment{300, []byte("gh")}, // 132 bytes after "ef": apart
		segment{20, []byte("xyz")},
	))
	out, err := instrument.Module(wasm)
	require.NoError(t, err)
	var joined []byte
	joined = append(joined, "ab"...)
	joined = append(joined, make([]byte, 8)...)
	joined = append(joined, "xyz"...)
	require.Equal(t, dataBody(
		segment{10, joined},
		segment{100, append(append([]byte("cd"), make([]byte, 64)...), "ef"...)},
		segment{300, []byte("gh")},
	), section(t, out, 11))

	want, err := memoryAfter(t, wasm)
	require.NoError(t, err)
	got, err := memoryAfter(t, out)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestDataSegmentsKeptApart: the data section is left as it is whenever
// joining could change what an instance starts with or refers to.
func TestDataSegmentsKeptApart(t *testing.T) {
	two := dataBody(segment{10, []byte("ab")}, segment{14, []byte("cd")})
	withDataCount := rebuild(t, dataModule(two), func(s wasmbin.Section) []wasmbin.Section {
		if s.ID == wasmbin.SectionCode {
			return []wasmbin.Section{{ID: 12, Body: []byte{2}}, s}
		}
		return []wasmbin.Section{s}
	})
	// A memory imported from env.memory, and the same two segments.
	imported := slices.Clone(wasmbin.Header)
	imports := append(wasmbin.AppendName(wasmbin.AppendName([]byte{1}, "env"), "memory"), wasmbin.KindMemory, 0x00, 0x01)
	imported = append(wasmbin.AppendU32(append(imported, wasmbin.SectionImport), uint32(len(imports))), imports...)
	imported = append(wasmbin.AppendU32(append(imported, 11), uint32(len(two))), two...)

	for name, tt := range map[string]struct {
		wasm []byte
		data []byte
	}{
		// The later one writes over the earlier.
		"overlapping": {data: dataBody(segment{10, []byte("abcd")}, segment{12, []byte("XY")}, segment{20, []byte("z")})},
		"passive":     {data: append([]byte{3, 0x01, 0x01, 'p'}, dataBody(segment{10, []byte("ab")}, segment{14, []byte("cd")})[1:]...)},
		"offset from a global": {data: append([]byte{2, 0x00, 0x23, 0x00, 0x0b, 0x01, 'g'},
			dataBody(segment{14, []byte("cd")})[1:]...)},
		"past any memory": {data: dataBody(segment{-1, []byte("cd")}, segment{10, []byte("ab")}, segment{14, []byte("cd")})},
		// memory.init and data.drop may refer to segments by index.
		"data count section": {wasm: withDataCount, data: two},
		// Where no segment writes, an imported memory need not be zero.
		"imported memory": {wasm: imported, data: two},
	} {
		t.Run(name, func(t *testing.T) {
			wasm := tt.wasm
			if wasm == nil {
				wasm = dataModule(tt.data)
			}
			if name == "offset from a global" {
				// An immutable i32 global, 10, for the offset.
				wasm = rebuild(t, wasm, func(s wasmbin.Section) []wasmbin.Section {
					if s.ID == wasmbin.SectionExport {
						return []wasmbin.Section{{ID: wasmbin.SectionGlobal, Body: []byte{1, 0x7f, 0x00, 0x41, 10, 0x0b}}, s}
					}
					return []wasmbin.Section{s}
				})
			}
			out, err := instrument.Module(wasm)
			require.NoError(t, err)
			assert.Equal(t, tt.data, section(t, out, 11))
		})
	}
}

// TestJoinedDataInitialisesMemoryAlike: for random layouts of segments,
// overlapping or not, in bounds or not, an instance of the rewritten module
// starts with the memory of one of the module as built, or both fail.
func TestJoinedDataInitialisesMemoryAlike(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	joined := 0
	for i := range 300 {
		segs := make([]segment, r.IntN(40))
		for k := range segs {
			init := make([]byte, r.IntN(40))
			for j := range init {
				init[j] = byte(1 + r.IntN(255))
			}
			off := int32(r.IntN(4096))
			if r.IntN(50) == 0 {
				off = int32(65536 - r.IntN(60)) // the end of the one page
			}
			segs[k] = segment{off, init}
		}
		if i%2 == 0 { // half the layouts apart
			segs = apart(segs)
		}
		wasm := dataModule(dataBody(segs...))
		out, err := instrument.Module(wasm)
		require.NoError(t, err)
		if n := section(t, out, 11)[0]; int(n) < len(segs) {
			joined++
		}
		want, wantErr := memoryAfter(t, wasm)
		got, gotErr := memoryAfter(t, out)
		msg := fmt.Sprintf("layout %d: %v", i, segs)
		if wantErr != nil {
			assert.Error(t, gotErr, msg)
			continue
		}
		require.NoError(t, gotErr, msg)
		assert.Equal(t, want, got, msg)
	}
	assert.Greater(t, joined, 100, "layouts whose segments were joined")
}

// apart moves segments so that none overlaps the one before it in offset
// order, keeping their order in the section.
func apart(segs []segment) []segment {
	order := make([]int, len(segs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(segs[a].off - segs[b].off) })
	end := int32(0)
	for _, i := range order {
		segs[i].off = max(segs[i].off, end)
		end = segs[i].off + int32(len(segs[i].init))
	}
	return segs
}
