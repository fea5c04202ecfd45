package loader

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// TestCheckCodeRefusesCompileBombs: a function past a bound on its shape is
// refused with the error naming the construct, and one at the bound is
// accepted, whatever form it takes.
func TestCheckCodeRefusesCompileBombs(t *testing.T) {
	tests := []struct {
		name     string
		f        wasmtest.Func
		want     error // nil: accepted
		mentions string
	}{
		{"one br_table past the bound", wasmtest.BrTable(2, 1, MaxBranchTargets+1, 0), ErrTooManyBranchTargets, "25001 targets in all"},
		{"br_tables past the bound together", wasmtest.BrTable(2, 10, MaxBranchTargets/10+1, 0), ErrTooManyBranchTargets, "25010 targets in all"},
		{"br_tables at the bound", wasmtest.BrTable(2, 5, MaxBranchTargets/5, 0), nil, ""},
		{"blocks nested past the bound", wasmtest.Nested(0x02, MaxNesting+1), ErrNestingTooDeep, "5001 blocks, loops and ifs are open at once"},
		{"loops nested past the bound", wasmtest.Nested(0x03, MaxNesting+1), ErrNestingTooDeep, "5001 blocks"},
		{"ifs nested past the bound", wasmtest.Nested(0x04, MaxNesting+1), ErrNestingTooDeep, "5001 blocks"},
		{"blocks, loops and ifs nested to the bound", wasmtest.Nested(0x03, MaxNesting), nil, ""},
		{"a large function", wasmtest.Straight(300_000), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := wasmtest.Bomb(tt.f)
			_, err := ReadSections(wasm)
			require.NoError(t, err, "the bounds on counts accept it")
			err = CheckCode(wasm)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.ErrorIs(t, err, hosterr.ErrCompileLimit)
			assert.ErrorContains(t, err, "function 0: ")
			assert.ErrorContains(t, err, tt.mentions)
			assert.ErrorContains(t, err, "split the function")
		})
	}
	t.Run("the bound is per function", func(t *testing.T) {
		f := wasmtest.BrTable(2, 1, MaxBranchTargets, 0)
		g := f
		g.Export = "other"
		require.NoError(t, CheckCode(wasmtest.Bomb(f, g)))
	})
	t.Run("the later function is named", func(t *testing.T) {
		g := wasmtest.Nested(0x02, MaxNesting+1)
		g.Export = "other"
		err := CheckCode(wasmtest.Bomb(wasmtest.Straight(1), g))
		require.ErrorIs(t, err, ErrNestingTooDeep)
		assert.ErrorContains(t, err, "function 1: ")
	})
	t.Run("many locals", func(t *testing.T) {
		_, err := ReadSections(wasmtest.Bomb(wasmtest.Sequence(1, MaxFunctionLocals+1)))
		require.ErrorIs(t, err, ErrTooManyLocals)
		require.ErrorIs(t, err, hosterr.ErrCompileLimit)
	})
}

// TestCheckCodeAcceptsBuiltPlugins: the sample plugins are far inside the
// bounds.
func TestCheckCodeAcceptsBuiltPlugins(t *testing.T) {
	for _, name := range []string{"inmemory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			wasm, err := os.ReadFile(filepath.Join("..", "..", "..", "plugins", name, name+".wasm"))
			require.NoError(t, err, "run make plugins")
			require.NoError(t, CheckCode(wasm))
		})
	}
}
