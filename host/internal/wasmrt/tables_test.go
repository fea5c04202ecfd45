package wasmrt

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// grower is an export that grows a table by n entries and returns what
// table.grow returned: the old size, or -1 if the table cannot grow.
func grower(name string, table byte, n int32) wasmtest.Func {
	code := append([]byte{0xd0, 0x70, 0x41}, wasmbin.AppendS32(nil, n)...) // ref.null func, i32.const n
	code = append(code, 0xfc, 0x0f, table)                                 // table.grow
	return wasmtest.Func{Export: name, Results: []byte{wasmtest.I32}, Code: code}
}

// TestTablesCannotTakeTheHostsMemory: a guest's tables, which the runtime
// keeps in the host's memory outside the memory limit, hold at most
// instrument.MaxTableEntries entries in all, whether the module was
// rewritten or not, on the compiler's code and on the interpreter's: they
// grow to the bound and not one entry past it (which, were there no bound,
// would cost 8 MiB).
func TestTablesCannotTakeTheHostsMemory(t *testing.T) {
	const bound, half = instrument.MaxTableEntries, instrument.MaxTableEntries / 2
	oneTable := []wasmtest.Func{
		grower("grow_past", 0, bound+1),
		grower("grow_to_bound", 0, bound),
		grower("grow_one", 0, 1),
	}
	// Two tables: each may grow by half the bound.
	twoTables := []wasmtest.Func{
		grower("grow_first_half", 0, half),
		grower("grow_second_half", 1, half),
		grower("grow_second_one", 1, 1),
	}
	one := []byte{1, 0x70, 0x00, 0x00}                   // funcref, no minimum, no maximum
	two := []byte{2, 0x70, 0x00, 0x00, 0x70, 0x00, 0x00} // two of them
	for _, kind := range engineKinds {
		for name, tt := range map[string]struct {
			memory bool
			table  []byte
			calls  []string // each call's error, "" for none, in order
		}{
			"rewritten":                 {true, one, []string{"grow_past returned 4294967295", "", "grow_one returned 4294967295"}},
			"not rewritten":             {false, one, []string{"grow_past returned 4294967295", "", "grow_one returned 4294967295"}},
			"two tables, rewritten":     {true, two, []string{"", "", "grow_second_one returned 4294967295"}},
			"two tables, not rewritten": {false, two, []string{"", "", "grow_second_one returned 4294967295"}},
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				funcs := oneTable
				if len(tt.table) > len(one) {
					funcs = twoTables
				}
				// A cache of its own: a rewrite kept by another version of
				// the code must not stand in for this one's. It closes after
				// the engine.
				c, err := NewCache(t.TempDir())
				require.NoError(t, err)
				t.Cleanup(func() { c.Close(context.Background()) })
				e := newEngine(t, c)
				if kind == "interpreter" {
					e.testBackground = func() bool { return false }
				} else {
					e.interpretFirst = false
				}
				wasm := wasmtest.Module{Funcs: funcs, Memory: tt.memory, Table: tt.table}.Bytes()
				m, err := e.Compile(context.Background(), sha256.Sum256(wasm), wasm, testPages)
				require.NoError(t, err)
				defer m.Release(context.Background())
				require.Equal(t, kind == "interpreter", m.Interpreted())
				require.Equal(t, tt.memory, m.code().interruptible, "rewritten: only with a memory")
				ctx := context.Background()
				in, err := m.NewInstance(ctx, testPages)
				require.NoError(t, err)
				defer in.Close(ctx)
				for i, f := range funcs {
					export := f.Export
					// A code other than 0 (the old size, here) is an error
					// that quotes it; -1 is 4294967295.
					_, err := in.Call(ctx, export, nil)
					if tt.calls[i] == "" {
						assert.NoError(t, err, export)
					} else {
						assert.ErrorContains(t, err, tt.calls[i], export)
					}
				}
			})
		}
	}
}
