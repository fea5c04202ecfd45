package instrument

import (
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// straight is the most bytes of code a path through a function runs
// between two checks without a branch back: past it, a check is inserted
// at the next instruction.
const straight = 1024

// rewriteCode returns the code section body with check inserted after the
// block type of every loop that can repeat, before every call that is not
// inside such a loop, and every straight bytes of code between those.
// globals is how many globals the module has; code that refers to another
// (one of those the rewrite adds) is malformed.
//
// Any run that does not end repeats a loop or makes calls without bound. A
// loop that repeats is checked at its header. A call is either checked
// itself or inside a checked loop, whose header the run passed on its way
// in (a branch cannot enter a loop from outside). So every unbounded run
// passes checks without bound. The bytes a frame runs since its last check
// are counted along every path, taking the most where paths merge (at the
// end of a block or if), so between two checks a frame runs at most about
// straight bytes of its own code, and from them calls functions that have
// no check, each of which runs at most about straight bytes on any path.
func rewriteCode(body []byte, check []byte, globals uint32) ([]byte, error) {
	r := &wasmbin.Reader{B: body}
	n := r.U32()
	out := wasmbin.AppendU32(make([]byte, 0, len(body)+len(body)/4), n)
	var fn []byte
	for i := uint32(0); i < n && r.Err == nil; i++ {
		size := r.U32()
		if r.Err != nil || uint64(size) > uint64(len(r.B)-r.Off) {
			return nil, fmt.Errorf("%w: function %d overruns the code section", wasmbin.ErrMalformed, i)
		}
		f := &wasmbin.Reader{B: r.B[r.Off : r.Off+int(size)]}
		r.Off += int(size)
		var err error
		if fn, err = rewriteFunc(fn[:0], f, check, globals); err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = wasmbin.AppendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: code section: %v", wasmbin.ErrMalformed, r.Err)
	}
	if r.Off != len(r.B) {
		return nil, fmt.Errorf("%w: %d bytes after the last function", wasmbin.ErrMalformed, len(r.B)-r.Off)
	}
	return out, nil
}

func rewriteFunc(out []byte, f *wasmbin.Reader, check []byte, globals uint32) ([]byte, error) {
	groups := f.U32()
	for i := uint32(0); i < groups && f.Err == nil; i++ {
		f.U32()
		if t := f.Byte(); !simpleType(t) {
			return nil, fmt.Errorf("%w: local of type %#x", ErrUnsupported, t)
		}
	}
	if f.Err != nil {
		return nil, fmt.Errorf("%w: locals: %v", wasmbin.ErrMalformed, f.Err)
	}
	out = append(out, f.B[:f.Off]...)
	code := f.B[f.Off:]
	repeats, err := repeatingLoops(code, globals)
	if err != nil {
		return nil, err
	}
	var (
		frames  []pathFrame
		checked int // how many open loops have a check
		// count is how many bytes of code the path to here ran since its
		// last check: over every path that merges here, the most.
		count  int
		labels []uint32
	)
	r := &wasmbin.Reader{B: code}
	from, loop := 0, 0
	insert := func(at int) {
		out = append(out, r.B[from:at]...)
		out = append(out, check...)
		from, count = at, 0
	}
	// branch records a branch to the end of the frame depth labels out.
	branch := func(depth uint32) {
		if depth < uint32(len(frames)) {
			if fr := &frames[len(frames)-1-int(depth)]; !fr.loop {
				fr.atEnd = max(fr.atEnd, count)
			}
		}
	}
	for r.Off < len(r.B) && r.Err == nil {
		at := r.Off
		op := r.Byte()
		if (isCall(op) && checked == 0) || count >= straight {
			insert(at)
		}
		labels = labels[:0]
		switch op {
		case 0x0c, 0x0d: // br, br_if
			labels = append(labels, r.U32())
		case 0x0e: // br_table
			n := r.U32()
			for i := uint32(0); i <= n && r.Err == nil; i++ {
				labels = append(labels, r.U32())
			}
		default:
			if err := skipImmediates(r, op); err != nil {
				return nil, err
			}
		}
		count += r.Off - at
		switch op {
		case 0x02: // block
			frames = append(frames, pathFrame{atEnd: -1})
		case 0x04: // if: the condition may skip to else or end
			frames = append(frames, pathFrame{isIf: true, atIf: count, atEnd: -1})
		case 0x03: // loop: the check opens its body if it can repeat
			rep := repeats[loop]
			loop++
			frames = append(frames, pathFrame{loop: true, checked: rep})
			if rep {
				checked++
				insert(r.Off)
			}
		case 0x05: // else: the then arm goes to the end; the else arm starts
			if n := len(frames); n > 0 {
				fr := &frames[n-1]
				fr.atEnd, count, fr.hasElse = max(fr.atEnd, count), fr.atIf, true
			}
		case 0x0b: // end of a frame, or (the last) of the function
			if n := len(frames); n > 0 {
				fr := frames[n-1]
				frames = frames[:n-1]
				if fr.checked {
					checked--
				}
				if !fr.loop {
					count = max(count, fr.atEnd)
					if fr.isIf && !fr.hasElse {
						count = max(count, fr.atIf)
					}
				}
			}
		case 0x0c, 0x0e: // br, br_table: what follows is not reached
			for _, l := range labels {
				branch(l)
			}
			count = 0
		case 0x0d: // br_if
			branch(labels[0])
		case 0x00, 0x0f, 0x12, 0x13: // unreachable, return and tail calls
			count = 0
		}
	}
	return append(out, r.B[from:]...), nil
}

// pathFrame is an open block, if or loop, as rewriteFunc follows paths.
type pathFrame struct {
	loop, checked bool // a loop; one with a check at its header
	isIf, hasElse bool
	atIf          int // bytes since a check where the arms start
	atEnd         int // the most over the branches to the end, -1 if none
}

// errGlobal is the error for a reference to a global the module does not
// have: the rewrite adds globals, so such a module would become valid, and
// able to reach the rewrite's own.
func errGlobal(g uint32) error {
	return fmt.Errorf("%w: global %d does not exist", wasmbin.ErrMalformed, g)
}

// constExpr skips a constant expression, refusing references to globals
// the module does not have.
func constExpr(r *wasmbin.Reader, globals uint32) error {
	for r.Err == nil {
		switch op := r.Byte(); op {
		case 0x0b:
			return nil
		case 0x23:
			if g := r.U32(); g >= globals && r.Err == nil {
				return errGlobal(g)
			}
		default:
			if err := skipImmediates(r, op); err != nil {
				return err
			}
		}
	}
	return nil
}

// isCall: call, call_indirect, and their tail forms.
func isCall(op byte) bool { return op >= 0x10 && op <= 0x13 }

// repeatingLoops decodes code once, following its structure, and returns
// for each of its loops, in order, whether a branch targets it: a loop no
// branch targets runs its body once.
func repeatingLoops(code []byte, globals uint32) ([]bool, error) {
	var repeats []bool
	// Each open block, loop or if: the loop's number, or -1.
	var frames []int
	target := func(depth uint32) {
		if depth < uint32(len(frames)) {
			if l := frames[len(frames)-1-int(depth)]; l >= 0 {
				repeats[l] = true
			}
		}
	}
	r := &wasmbin.Reader{B: code}
	for r.Off < len(r.B) && r.Err == nil {
		switch op := r.Byte(); op {
		case 0x02, 0x04: // block, if
			blockType(r)
			frames = append(frames, -1)
		case 0x03: // loop
			blockType(r)
			frames = append(frames, len(repeats))
			repeats = append(repeats, false)
		case 0x0b: // end: of a frame, or (the last) of the function
			if len(frames) > 0 {
				frames = frames[:len(frames)-1]
			}
		case 0x0c, 0x0d: // br, br_if
			target(r.U32())
		case 0x0e: // br_table
			n := r.U32()
			for i := uint32(0); i <= n && r.Err == nil; i++ {
				target(r.U32())
			}
		case 0x23, 0x24: // global.get, global.set
			if g := r.U32(); g >= globals && r.Err == nil {
				return nil, errGlobal(g)
			}
		default:
			if err := skipImmediates(r, op); err != nil {
				return nil, err
			}
		}
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: %v", wasmbin.ErrMalformed, r.Err)
	}
	return repeats, nil
}

// simpleType: a number, vector or reference type of one byte.
func simpleType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

func blockType(r *wasmbin.Reader) {
	if r.Off < len(r.B) && (r.B[r.Off] == 0x40 || simpleType(r.B[r.Off])) {
		r.Off++
		return
	}
	r.SkipLEB(5) // a type index, as a signed 33-bit number
}

func memArg(r *wasmbin.Reader) {
	if r.U32()&0x40 != 0 { // a memory index follows (multiple memories)
		r.U32()
	}
	r.U32()
}

// skipImmediates skips what follows op in the code.
func skipImmediates(r *wasmbin.Reader, op byte) error {
	switch {
	case op == 0x02, op == 0x03, op == 0x04: // block, loop, if
		blockType(r)
	case op == 0x0c, op == 0x0d, // br, br_if
		op == 0x10, op == 0x12, // call, return_call
		op >= 0x20 && op <= 0x26, // local.*, global.*, table.get, table.set
		op == 0xd2:               // ref.func
		r.U32()
	case op == 0x0e: // br_table
		n := r.U32()
		for i := uint32(0); i <= n && r.Err == nil; i++ {
			r.U32()
		}
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.U32()
		r.U32()
	case op == 0x1c: // select with types
		n := r.U32()
		r.Skip(int(min(n, 1<<20)))
	case op >= 0x28 && op <= 0x3e: // loads and stores
		memArg(r)
	case op == 0x3f, op == 0x40: // memory.size, memory.grow
		r.U32()
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
		return skipPrefixed(r)
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1:
		// no immediates
	default:
		return fmt.Errorf("%w: opcode %#x", ErrUnsupported, op)
	}
	return nil
}

// skipPrefixed skips an 0xfc instruction: saturating truncations, bulk
// memory and table operations.
func skipPrefixed(r *wasmbin.Reader) error {
	switch sub := r.U32(); {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init
		r.U32()
		r.U32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
		// data.drop, memory.fill, elem.drop, table.grow, table.size, table.fill
		r.U32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		r.U32()
		r.U32()
	default:
		return fmt.Errorf("%w: opcode 0xfc %d", ErrUnsupported, sub)
	}
	return nil
}
