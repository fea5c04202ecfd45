package wasmrt

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// grower is an export that grows table 0 by n entries and returns what
// table.grow returned: the old size, or -1 if the table cannot grow.
func grower(name string, n uint32) wasmtest.Func {
	code := append([]byte{0xd0, 0x70, 0x41}, wasmbin.AppendU32(nil, n)...) // ref.null func, i32.const n (n < 2^31, positive)
	code = append(code, 0xfc, 0x0f, 0x00)                                  // table.grow 0
	return wasmtest.Func{Export: name, Results: []byte{wasmtest.I32}, Code: code}
}

// TestTablesCannotTakeTheHostsMemory: a guest's table, which the runtime
// keeps in the host's memory outside the memory limit, grows to at most
// instrument.MaxTableEntries, whether its module was rewritten or not.
func TestTablesCannotTakeTheHostsMemory(t *testing.T) {
	// One entry past the bound: were there none, it would cost 8 MiB.
	funcs := []wasmtest.Func{grower("grow_past", instrument.MaxTableEntries+1), grower("grow_a_little", 16)}
	table := []byte{1, 0x70, 0x00, 0x00} // funcref, no minimum, no maximum
	modules := map[string]*Module{
		"rewritten":     compileBytes(t, wasmtest.Module{Funcs: funcs, Memory: true, Table: table}.Bytes()),
		"not rewritten": compileBytes(t, wasmtest.Module{Funcs: funcs, Table: table}.Bytes()),
	}
	require.True(t, modules["rewritten"].compiled.interruptible)
	require.False(t, modules["not rewritten"].compiled.interruptible)
	for name, m := range modules {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			in, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			// A code other than 0 is an error that quotes it.
			_, err = in.Call(ctx, "grow_past", nil)
			assert.ErrorContains(t, err, "grow_past returned 4294967295", "past the bound: table.grow fails")
			_, err = in.Call(ctx, "grow_a_little", nil)
			assert.NoError(t, err, "16 entries from 0: table.grow returns the old size, 0")
			_, err = in.Call(ctx, "grow_a_little", nil)
			assert.ErrorContains(t, err, "grow_a_little returned 16", "16 more: the old size, 16")
		})
	}
}
