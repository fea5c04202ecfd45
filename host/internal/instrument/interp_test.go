package instrument

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// TestForInterpreterCountsNoBudget: the rewrite for wazero's interpreter,
// which checks at every loop header itself and runs in Go, neither counts
// the budget down nor visits the host nor reads the flag; its checks are
// empty loops. The rewrite for the compiler does all three. (The deadline
// tests in host/internal/wasmrt hold both to the bound.)
func TestForInterpreterCountsNoBudget(t *testing.T) {
	tests := []struct {
		name string
		code []byte
		// loops: the interpreter's rewrite adds an empty loop (after a
		// call, or in straight code); a loop of the module's own is
		// checked by the interpreter at its header.
		loops bool
	}{
		{"a loop", []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}, false},
		{"a call outside loops", []byte{0x10, 0x01}, true},
		{"straight code", bytes.Repeat([]byte{0x41, 0x01, 0x1a}, 2*straight), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := wasmtest.Module{Memory: true, Funcs: []wasmtest.Func{{Code: tt.code}, {Code: []byte{0x01}}}}.Bytes()
			compiled, err := Module(wasm)
			require.NoError(t, err)
			interp, err := ForInterpreter(wasm, nil)
			require.NoError(t, err)
			// The module has no globals of its own: the rewrite's counter
			// is global 0, its flag global 1.
			c, i := uses(t, compiled), uses(t, interp)
			assert.True(t, c.counter && c.flag && c.visit, "the compiler's rewrite counts, visits the host and reads the flag: %+v", c)
			assert.False(t, i.counter || i.flag || i.visit, "the interpreter's rewrite: %+v", i)
			assert.Equal(t, tt.loops, i.emptyLoops > 0, "empty loops in the interpreter's rewrite")
		})
	}
}

// budgetUses is what a rewrite's code does of the budget.
type budgetUses struct {
	counter, flag, visit bool // sets global 0, reads global 1, grows memory
	emptyLoops           int
}

// uses walks the instructions of every function of wasm, a rewrite of a
// module without globals of its own.
func uses(t *testing.T, wasm []byte) budgetUses {
	t.Helper()
	secs, err := wasmbin.Sections(wasm)
	require.NoError(t, err)
	var u budgetUses
	for _, s := range secs {
		if s.ID != wasmbin.SectionCode {
			continue
		}
		r := &wasmbin.Reader{B: s.Body}
		for n := r.U32(); n > 0; n-- {
			size := int(r.U32())
			f := &wasmbin.Reader{B: r.B[r.Off : r.Off+size]}
			r.Off += size
			for g := f.U32(); g > 0; g-- {
				f.U32()
				f.Byte()
			}
			for f.Off < len(f.B) {
				at := f.Off
				op := f.Byte()
				switch {
				case op == 0x24 && f.U32() == 0:
					u.counter = true
				case op == 0x23 && f.U32() == 1:
					u.flag = true
				case op == 0x40:
					u.visit = true
					f.U32()
				case op == 0x03 && bytes.HasPrefix(f.B[at:], emptyLoop):
					u.emptyLoops++
					f.Off = at + len(emptyLoop)
				default:
					f.Off = at + 1
					require.NoError(t, f.SkipImmediates(op))
				}
			}
			require.NoError(t, f.Err)
		}
	}
	return u
}
