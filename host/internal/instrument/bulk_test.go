package instrument_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// The bulk module: memory of bulkPages, a table of bulkTable entries, a
// passive data segment of bulkData bytes and an element segment of
// bulkElems functions, and exports that run each bulk instruction on their
// parameters, and probe(i), which tells what the table holds at i.
const (
	bulkPages = 5 // a few chunks of 64 KiB
	bulkTable = 10000
	bulkData  = 150000
	bulkElems = 9000
)

func bulkModule() []byte {
	sec := func(out []byte, id byte, body []byte) []byte {
		return append(wasmbin.AppendU32(append(out, id), uint32(len(body))), body...)
	}
	fn := func(code ...byte) []byte {
		f := append([]byte{0}, code...)
		f = append(f, 0x0b)
		return append(wasmbin.AppendU32(nil, uint32(len(f))), f...)
	}
	fnLocals := func(locals []byte, code ...byte) []byte {
		f := append(slices.Clone(locals), code...)
		f = append(f, 0x0b)
		return append(wasmbin.AppendU32(nil, uint32(len(f))), f...)
	}
	args := []byte{0x20, 0, 0x20, 1, 0x20, 2}
	// Functions: 0-3 return 100..103; 4.. the exports.
	funcs := [][]byte{
		fn(0x41, 100), fn(0x41, 101), fn(0x41, 102), fn(0x41, 103),
		fn(append(slices.Clone(args), 0xfc, 11, 0)...),    // fill
		fn(append(slices.Clone(args), 0xfc, 10, 0, 0)...), // copy
		fn(append(slices.Clone(args), 0xfc, 8, 0, 0)...),  // init
		fn(0x20, 0, 0xd2, 2, 0x20, 2, 0xfc, 17, 0),        // tfill(i, _, n) with f2
		fn(append(slices.Clone(args), 0xfc, 14, 0, 0)...), // tcopy
		fn(append(slices.Clone(args), 0xfc, 12, 0, 0)...), // tinit
		fn(0x20, 0, 0x25, 0, 0xd1, 0x04, 0x7f, 0x41, 0x7f, 0x05, // probe: table.get i; ref.is_null; if (result i32) -1
			0x20, 0, 0x11, 0, 0, 0x0b), // else call_indirect type 0
		fn(0xfc, 0x09, 0), // data.drop 0
		// digest: acc = acc*31 + probe(i) over the table, in a loop.
		fnLocals([]byte{1, 2, 0x7f}, // locals i, acc
			0x02, 0x40, 0x03, 0x40, // block loop
			0x20, 1, 0x41, 31, 0x6c, 0x20, 0, 0x10, 10, 0x6a, 0x21, 1, // acc = acc*31 + probe(i)
			0x20, 0, 0x41, 1, 0x6a, 0x22, 0, // i++ (tee)
			0xfc, 16, 0, 0x49, 0x0d, 0, // br_if loop (i < table.size)
			0x0b, 0x0b, 0x20, 1),
	}
	names := []string{"fill", "copy", "init", "tfill", "tcopy", "tinit", "probe", "drop", "digest"}
	out := slices.Clone(wasmbin.Header)
	// type 0: () -> i32; 1: (i32 i32 i32) -> (); 2: (i32) -> i32; 3: () -> ()
	out = sec(out, wasmbin.SectionType, []byte{4, 0x60, 0, 1, 0x7f, 0x60, 3, 0x7f, 0x7f, 0x7f, 0, 0x60, 1, 0x7f, 1, 0x7f, 0x60, 0, 0})
	out = sec(out, wasmbin.SectionFunction, []byte{13, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 3, 0})
	out = sec(out, wasmbin.SectionTable, wasmbin.AppendU32([]byte{1, 0x70, 0x00}, bulkTable))
	out = sec(out, wasmbin.SectionMemory, []byte{1, 0x00, bulkPages})
	exports := []byte{byte(len(names) + 1)}
	for i, n := range names {
		exports = append(wasmbin.AppendName(exports, n), 0x00, byte(4+i))
	}
	exports = append(wasmbin.AppendName(exports, "memory"), 0x02, 0)
	out = sec(out, wasmbin.SectionExport, exports)
	elems := wasmbin.AppendU32([]byte{1, 0x01, 0x00}, bulkElems) // passive funcref
	for i := range bulkElems {
		elems = append(elems, byte(i%4))
	}
	out = sec(out, wasmbin.SectionElement, elems)
	out = sec(out, wasmbin.SectionDataCount, []byte{1})
	code := []byte{byte(len(funcs))}
	for _, f := range funcs {
		code = append(code, f...)
	}
	out = sec(out, wasmbin.SectionCode, code)
	data := make([]byte, bulkData)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	seg := wasmbin.AppendU32([]byte{1, 0x01}, bulkData)
	return sec(out, wasmbin.SectionData, append(seg, data...))
}

// TestBulkInstructionsKeepTheirMeaning runs random bulk instructions, many
// longer than a chunk, overlapping, or out of bounds, on the module and on
// its rewrite side by side: each traps in both or in neither, and memory
// and table are alike after each.
func TestBulkInstructionsKeepTheirMeaning(t *testing.T) {
	ctx := context.Background()
	original := bulkModule()
	rewritten, err := instrument.Module(original)
	require.NoError(t, err)
	require.NotEqual(t, original, rewritten)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(false))
	defer rt.Close(ctx)
	instantiate := func(wasm []byte, name string) api.Module {
		m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(name))
		require.NoError(t, err)
		return m
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	memSize := uint32(bulkPages << 16)
	// A length or offset: often near a chunk, the memory's size or the
	// end of 32 bits.
	pick := func(limit uint32) uint32 {
		switch rng.IntN(6) {
		case 0:
			return rng.Uint32()
		case 1:
			return limit - uint32(rng.IntN(3))
		case 2:
			return uint32(rng.IntN(4))<<16 + uint32(rng.IntN(5)) - 2
		case 3:
			return ^uint32(0) - uint32(rng.IntN(3))
		default:
			return uint32(rng.IntN(int(limit) + 2))
		}
	}
	for round := range 3 {
		a, b := instantiate(original, fmt.Sprint("a", round)), instantiate(rewritten, fmt.Sprint("b", round))
		// Memory of random bytes, so that a byte copied from the wrong
		// place shows.
		noise := make([]byte, memSize)
		for i := range noise {
			noise[i] = byte(rng.Uint32())
		}
		require.True(t, a.Memory().Write(0, noise))
		require.True(t, b.Memory().Write(0, noise))
		for step := range 300 {
			name := []string{"fill", "copy", "init", "tfill", "tcopy", "tinit"}[rng.IntN(6)]
			limit, source := memSize, memSize
			switch name {
			case "init":
				source = bulkData
			case "tfill", "tcopy":
				limit, source = bulkTable, bulkTable
			case "tinit":
				limit, source = bulkTable, bulkElems
			}
			n := pick(max(limit, source))
			params := []uint64{uint64(pick(limit)), uint64(pick(source)), uint64(n)}
			if name == "fill" {
				params[1] = uint64(rng.Uint32())
			}
			_, errA := a.ExportedFunction(name).Call(ctx, params...)
			_, errB := b.ExportedFunction(name).Call(ctx, params...)
			require.Equal(t, errA == nil, errB == nil, "step %d: %s%v traps alike: %v, %v", step, name, params, errA, errB)
			if errA != nil {
				first := func(err error) string { return strings.SplitN(err.Error(), "\n", 2)[0] }
				assert.Equal(t, first(errA), first(errB), "%s%v traps with the same error", name, params)
			}
			memA, _ := a.Memory().Read(0, memSize)
			memB, _ := b.Memory().Read(0, memSize)
			require.True(t, slices.Equal(memA, memB), "step %d: memory after %s%v", step, name, params)
			require.Equal(t, digest(t, a), digest(t, b), "step %d: table after %s%v", step, name, params)
			if step == 200 {
				for _, m := range []api.Module{a, b} {
					_, err := m.ExportedFunction("drop").Call(ctx)
					require.NoError(t, err)
				}
			}
		}
	}
}

// digest is a digest of what the table holds.
func digest(t *testing.T, m api.Module) uint64 {
	t.Helper()
	res, err := m.ExportedFunction("digest").Call(context.Background())
	require.NoError(t, err)
	return res[0]
}
