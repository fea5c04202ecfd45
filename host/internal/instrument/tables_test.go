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
	tests := map[string]struct{ table, want []byte }{
		"no maximum":          {[]byte{1, 0x70, 0x00, 5}, cat([]byte{1, 0x70, 0x01, 5}, limit)},
		"a larger maximum":    {[]byte{1, 0x6f, 0x01, 5, 0xff, 0xff, 0xff, 0xff, 0x0f}, cat([]byte{1, 0x6f, 0x01, 5}, limit)},
		"a smaller maximum":   {[]byte{1, 0x70, 0x01, 5, 9}, []byte{1, 0x70, 0x01, 5, 9}},
		"under the minimum":   {[]byte{1, 0x70, 0x01, 5, 4}, []byte{1, 0x70, 0x01, 5, 4}},
		"two tables":          {[]byte{2, 0x70, 0x00, 0, 0x6f, 0x01, 1, 2}, cat([]byte{2, 0x70, 0x01, 0}, limit, []byte{0x6f, 0x01, 1, 2})},
		"at the most allowed": {cat([]byte{1, 0x70, 0x00}, limit), cat([]byte{1, 0x70, 0x01}, limit, limit)},
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
	assert.ErrorContains(t, err, "table 0 has 1048577 entries; a table may have at most 1048576")
	_, err = instrument.Module(big)
	require.ErrorIs(t, err, instrument.ErrTableTooLarge)

	shared := wasmtest.Module{Funcs: []wasmtest.Func{sum}, Table: []byte{1, 0x70, 0x03, 1, 2}}.Bytes()
	_, err = instrument.BoundTables(shared)
	require.ErrorIs(t, err, instrument.ErrUnsupported)
}
