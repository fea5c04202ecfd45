package loader

import (
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// Bounds on the shape of a function's code, beyond which the runtime's
// optimizing compiler takes time or memory out of proportion to the
// module's size. Each is many times what real plugins use (RATIONALE.md,
// "Why are there bounds on a function's shape, and a compile process?").
const (
	// MaxBranchTargets is the most targets a function's br_table
	// instructions may have in all. The compiler's cost grows faster than
	// the targets of a function: 10 tables of 10,000 took it 1.7 s and
	// 246 MB, 40 of them 20 s and 967 MB.
	MaxBranchTargets = 25_000
	// MaxNesting is the most blocks, loops and ifs open at once in a
	// function. The cost grows with the square of the depth: 10,000
	// nested loops took 3.2 s.
	MaxNesting = 5_000
)

// Errors naming the construct that exceeds a bound. Each wraps
// hosterr.ErrCompileLimit.
var (
	ErrTooManyBranchTargets = fmt.Errorf("%w: too many br_table targets", hosterr.ErrCompileLimit)
	ErrNestingTooDeep       = fmt.Errorf("%w: blocks nested too deep", hosterr.ErrCompileLimit)
)

// CheckCode refuses a module whose functions exceed the bounds on their
// shape (MaxBranchTargets, MaxNesting). It reads every instruction (25 ms
// for the sqlite plugin's 4 MB), so the host runs it only before it
// compiles a module, never on a load from the compile cache. Code it
// cannot decode ends its walk of that function: the runtime refuses it, or
// the compile process's limits bound it.
func CheckCode(wasm []byte) error {
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return err
	}
	for _, s := range secs {
		if s.ID != wasmbin.SectionCode {
			continue
		}
		r := &wasmbin.Reader{B: s.Body}
		n := r.U32()
		for i := uint32(0); i < n && r.Err == nil; i++ {
			size := r.U32()
			if r.Err != nil || uint64(size) > uint64(len(r.B)-r.Off) {
				return nil // the bounds walk has refused it already
			}
			sh := shapeOf(r.B[r.Off : r.Off+int(size)])
			r.Off += int(size)
			if err := sh.check(); err != nil {
				return fmt.Errorf("function %d: %w", i, err)
			}
		}
	}
	return nil
}

// shape is what CheckCode measures of one function.
type shape struct {
	depth   int // the most blocks, loops and ifs open at once
	targets int // of all br_table instructions, defaults included
}

func (sh shape) check() error {
	switch {
	case sh.targets > MaxBranchTargets:
		return fmt.Errorf("%w: its br_table instructions have %d targets in all, more than the %d the host compiles in a function: split the function", ErrTooManyBranchTargets, sh.targets, MaxBranchTargets)
	case sh.depth > MaxNesting:
		return fmt.Errorf("%w: %d blocks, loops and ifs are open at once, more than the %d the host compiles: split the function", ErrNestingTooDeep, sh.depth, MaxNesting)
	}
	return nil
}

// shapeOf walks the instructions of a function body.
func shapeOf(body []byte) shape {
	var sh shape
	r := &wasmbin.Reader{B: body}
	groups := r.U32()
	for i := uint32(0); i < groups && r.Err == nil; i++ {
		r.U32()
		r.Byte()
	}
	depth := 0
	for r.Off < len(r.B) && r.Err == nil {
		switch op := r.Byte(); op {
		case 0x02, 0x03, 0x04: // block, loop, if
			blockType(r)
			depth++
			sh.depth = max(sh.depth, depth)
		case 0x0b: // end
			depth--
		case 0x0e: // br_table
			n := r.U32()
			sh.targets += int(n) + 1
			for i := uint32(0); i <= n && r.Err == nil; i++ {
				r.U32()
			}
		default:
			if errors.Is(skip(r, op), errOpcode) {
				return sh
			}
		}
	}
	return sh
}

var errOpcode = errors.New("unknown opcode")

func blockType(r *wasmbin.Reader) {
	if r.Off < len(r.B) {
		switch r.B[r.Off] {
		case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			r.Off++
			return
		}
	}
	r.SkipLEB(5) // a type index, as a signed 33-bit number
}

func memArg(r *wasmbin.Reader) {
	if r.U32()&0x40 != 0 { // a memory index follows (multiple memories)
		r.U32()
	}
	r.U32()
}

// skip skips the immediates of op, other than block, loop, if and
// br_table, which shapeOf reads itself.
func skip(r *wasmbin.Reader, op byte) error {
	switch {
	case op == 0x0c, op == 0x0d, // br, br_if
		op == 0x10, op == 0x12, // call, return_call
		op >= 0x20 && op <= 0x26, // local.*, global.*, table.get, table.set
		op == 0xd2,               // ref.func
		op == 0x3f, op == 0x40:   // memory.size, memory.grow
		r.U32()
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.U32()
		r.U32()
	case op == 0x1c: // select with types
		r.Skip(int(r.U32()))
	case op >= 0x28 && op <= 0x3e: // loads and stores
		memArg(r)
	case op == 0x41:
		r.SkipLEB(5)
	case op == 0x42:
		r.SkipLEB(10)
	case op == 0x43:
		r.Skip(4)
	case op == 0x44:
		r.Skip(8)
	case op == 0xd0: // ref.null
		r.Byte()
	case op == 0xfc:
		return skipFC(r)
	case op == 0xfd:
		return skipSIMD(r)
	case op <= 0x01, op == 0x05, op == 0x0f, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1:
		// no immediates
	default:
		return errOpcode
	}
	return nil
}

// skipFC skips an 0xfc instruction: saturating truncations, bulk memory
// and table operations.
func skipFC(r *wasmbin.Reader) error {
	switch sub := r.U32(); {
	case sub <= 7: // trunc_sat
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.U32()
		r.U32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
		r.U32()
	default:
		return errOpcode
	}
	return nil
}

// skipSIMD skips an 0xfd instruction.
func skipSIMD(r *wasmbin.Reader) error {
	switch sub := r.U32(); {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		memArg(r)
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.Skip(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.Byte()
	case sub >= 84 && sub <= 91: // load and store lane
		memArg(r)
		r.Byte()
	case sub <= 0xff:
		// no immediates
	default:
		return errOpcode
	}
	return nil
}
