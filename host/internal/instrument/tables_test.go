package instrument_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// TestBoundTables: every table the module defines gets a maximum of at
// most MaxTableEntries, whether or not it is otherwise rewritten; a maximum
// under the minimum stays for the runtime to refuse; a larger minimum is
// refused.
func TestBoundTables(t *testing.T) {
	limit := wasmbin.AppendU32(nil, instrument.MaxTableEntries)
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	u := func(v uint32) []byte { return wasmbin.AppendU32(nil, v) }
	cat3 := func(b []byte) []byte { return cat(b, b, b) }
	tests := map[string]struct{ table, want []byte }{
		"no maximum":          {[]byte{1, 0x70, 0x00, 5}, cat([]byte{1, 0x70, 0x01, 5}, limit)},
		"a larger maximum":    {[]byte{1, 0x6f, 0x01, 5, 0xff, 0xff, 0xff, 0xff, 0x0f}, cat([]byte{1, 0x6f, 0x01, 5}, limit)},
		"a smaller maximum":   {[]byte{1, 0x70, 0x01, 5, 9}, []byte{1, 0x70, 0x01, 5, 9}},
		"under the minimum":   {[]byte{1, 0x70, 0x01, 5, 4}, []byte{1, 0x70, 0x01, 5, 4}},
		"at the most allowed": {cat([]byte{1, 0x70, 0x00}, limit), cat([]byte{1, 0x70, 0x01}, limit, limit)},
		// Each may grow by half of what the minimums leave: 524,287.
		"two tables": {cat([]byte{2, 0x70, 0x00, 0, 0x6f, 0x01, 1}, u(9_000_000)),
			cat([]byte{2, 0x70, 0x01, 0}, u(524_287), []byte{0x6f, 0x01, 1}, u(524_288))},
		"two, one with a smaller maximum": {[]byte{2, 0x70, 0x00, 0, 0x6f, 0x01, 1, 2},
			cat([]byte{2, 0x70, 0x01, 0}, u(524_287), []byte{0x6f, 0x01, 1, 2})},
		"three tables": {cat([]byte{3}, cat3([]byte{0x70, 0x00, 0})),
			cat([]byte{3}, cat3(cat([]byte{0x70, 0x01, 0}, u(349_525))))},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for _, memory := range []bool{true, false} { // rewritten, or not
				wasm := wasmtest.Module{Funcs: []wasmtest.Func{sum}, Memory: memory, Table: tt.table}.Bytes()
				out, err := instrument.BoundTables(wasm)
				require.NoError(t, err)
				assert.Equal(t, tt.want, section(t, out, 4))
				if memory {
					out, err = instrument.Module(wasm)
					require.NoError(t, err)
					assert.Equal(t, tt.want, section(t, out, 4), "rewritten")
				}
			}
		})
	}

	wasm := wasmtest.Module{Funcs: []wasmtest.Func{sum}}.Bytes()
	out, err := instrument.BoundTables(wasm)
	require.NoError(t, err)
	assert.Equal(t, wasm, out, "no table: the module as it is")

	big := wasmtest.Module{Funcs: []wasmtest.Func{sum}, Memory: true,
		Table: cat([]byte{1, 0x70, 0x00}, wasmbin.AppendU32(nil, instrument.MaxTableEntries+1))}.Bytes()
	_, err = instrument.BoundTables(big)
	require.ErrorIs(t, err, instrument.ErrTableTooLarge)
	assert.ErrorContains(t, err, "the module's tables start with 1048577 entries; its tables may have at most 1048576 in all")
	_, err = instrument.Module(big)
	require.ErrorIs(t, err, instrument.ErrTableTooLarge)

	half := wasmbin.AppendU32(nil, instrument.MaxTableEntries/2+1)
	two := wasmtest.Module{Funcs: []wasmtest.Func{sum}, Table: cat([]byte{2, 0x70, 0x00}, half, []byte{0x70, 0x00}, half)}.Bytes()
	_, err = instrument.BoundTables(two)
	require.ErrorIs(t, err, instrument.ErrTableTooLarge, "two tables of half the bound and one entry")

	shared := wasmtest.Module{Funcs: []wasmtest.Func{sum}, Table: []byte{1, 0x70, 0x03, 1, 2}}.Bytes()
	_, err = instrument.BoundTables(shared)
	require.ErrorIs(t, err, instrument.ErrUnsupported)
}
