package loader

import (
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

// CheckShape refuses a function whose code has blocks, loops and ifs
// open depth deep at most, and br_table instructions of targets targets in
// all (defaults included), past the bounds: CheckCode for one function,
// for a pass over the code that measures them itself.
func CheckShape(depth, targets int) error { return shape{depth: depth, targets: targets}.check() }

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
			r.BlockType()
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
			if r.SkipImmediates(op) != nil {
				return sh
			}
		}
	}
	return sh
}
