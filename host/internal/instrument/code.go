package instrument

import (
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// straight is the most units of a function's own code (see cost) a path
// runs between two checks without a branch back: past it, a check is
// inserted at the next instruction.
const straight = 1024

// leafUnits: a function returns through a check when its own code since
// its last check counts more than this.
const leafUnits = 128

// callUnits is what a call is charged for the callee's code that its own
// checks do not charge: the path on which it returns without a check, at
// most leafUnits of its own, and the call and return themselves. A callee
// that returns without a check may do so right after its own callee did:
// a recursion unwinds through at most one such path per frame between two
// checks, and MaxDepth bounds the frames.
const callUnits = leafUnits + 16

// instrUnits is what an instruction of size bytes counts for: a unit a
// byte, at most 16 (only one target of a br_table runs, however many it
// lists), and more for the instructions that take tens of cycles, so that
// a unit never costs more than a few cycles.
func instrUnits(op byte, size int) int {
	switch {
	case op >= 0x6d && op <= 0x70, op >= 0x7f && op <= 0x82: // integer division and remainder
		return 32
	case op == 0x91, op == 0x95, op == 0x9f, op == 0xa3: // float square root and division
		return 8
	case op == 0x40: // memory.grow, served in Go
		return 64
	}
	return min(size, 16)
}

// cost is what a path ran since its last check: own, the units of the
// function's own code, which decide where checks go; and charge, own plus
// what the calls on the path cost beyond their own checks, which the next
// check charges to the budget.
type cost struct{ own, charge int }

func (c cost) max(d cost) cost { return cost{max(c.own, d.own), max(c.charge, d.charge)} }

// rewriter rewrites the code of one module.
type rewriter struct {
	check   checker
	globals uint32
	shape   *shape
	bulk    bulkHelpers
	// bound, when set, is held to each function's shape (see Bound).
	bound Bound
	// frames and labels are rewriteFunc's, kept for the next function.
	frames []pathFrame
	labels []uint32
}

// rewriteCode returns the code section body with checks inserted (see
// rewriteFunc) and bulk instructions replaced (see bulkHelpers). Code that
// refers to a global the module does not have (one of those the rewrite
// adds) is malformed.
//
// Any run that does not end repeats a loop or makes calls without bound. A
// loop that repeats is checked at its header. A call is either checked
// itself or inside a checked loop, whose header the run passed on its way
// in (a branch cannot enter a loop from outside). So every unbounded run
// passes checks without bound. Each check charges the most that any path
// into it ran since the previous check, and the host is visited once the
// charges add up to Budget. Between two visits the guest runs at most
// Budget units, plus what one check charges, plus the return of up to
// the frames that MaxDepth allows, each through at most leafUnits of its
// own code.
func (x *rewriter) rewriteCode(body []byte) ([]byte, error) {
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
		if fn, err = x.rewriteFunc(fn[:0], i, f); err != nil {
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

// rewriteFunc rewrites function i, whose body f holds. It inserts a check
// after the block type of every loop that can repeat, before every call
// that is not inside such a loop, before the function returns if its own
// code since its last check counts more than leafUnits, and every straight
// units of code between those.
func (x *rewriter) rewriteFunc(out []byte, i uint32, f *wasmbin.Reader) ([]byte, error) {
	groups := f.U32()
	var locals uint64
	for g := uint32(0); g < groups && f.Err == nil; g++ {
		locals += uint64(f.U32())
		if t := f.Byte(); !wasmbin.SimpleType(t) {
			return nil, fmt.Errorf("%w: local of type %#x", ErrUnsupported, t)
		}
	}
	if f.Err != nil {
		return nil, fmt.Errorf("%w: locals: %v", wasmbin.ErrMalformed, f.Err)
	}
	code := f.B[f.Off:]
	if int(i) >= len(x.shape.funcTypes) || int(x.shape.funcTypes[i]) >= len(x.shape.typeParams) {
		return nil, fmt.Errorf("%w: function %d has no type", wasmbin.ErrMalformed, i)
	}
	// The function gets locals after all of its own: one that keeps the
	// depth around its calls, and one for the length of its inline bulk
	// instructions.
	own := uint64(x.shape.typeParams[x.shape.funcTypes[i]]) + locals
	if own >= 1<<31 {
		return nil, fmt.Errorf("%w: %d locals", wasmbin.ErrMalformed, own)
	}
	scan, err := scanFunc(code, x.shape, uint32(own))
	if err != nil {
		return nil, err
	}
	if x.bound != nil {
		if err := x.bound(scan.depth, scan.targets); err != nil {
			return nil, err
		}
	}
	saved, length, added := uint32(own), uint32(own), uint32(0)
	if scan.calls {
		length++
		added++
	}
	if scan.memoryBulk {
		added++
	}
	if added > 0 {
		out = wasmbin.AppendU32(out, groups+1)
		out = append(out, f.B[len(wasmbin.AppendU32(nil, groups)):f.Off]...)
		out = append(out, byte(added), 0x7f)
	} else {
		out = append(out, f.B[:f.Off]...)
	}
	frame := FrameUnits(len(code), own)
	out = append(out, x.check.enter(frame)...)
	var (
		// frames and labels reuse the rewriter's, so that a module's
		// thousands of functions do not allocate them each.
		frames  = x.frames[:0]
		checked int // how many open loops have a check
		// count is what the path to here ran since its last check: over
		// every path that merges here, the most.
		count  cost
		labels = x.labels[:0]
	)
	defer func() { x.frames, x.labels = frames[:0], labels[:0] }()
	r := &wasmbin.Reader{B: code}
	from, loop := 0, 0
	// interp: the rewrite for wazero's interpreter, which checks at every
	// loop header itself (see ForInterpreter): a check is an empty loop,
	// and there is no budget to charge.
	interp := x.check.loop
	// insert copies the code up to at and a check charging count after it,
	// and returns where in out the charge is (-1: none).
	insert := func(at int) int {
		out = append(out, r.B[from:at]...)
		pos := -1
		if interp {
			out = append(out, emptyLoop...)
		} else {
			pos = len(out) + x.check.chargeAt()
			out = append(out, x.check.code(uint32(min(count.charge, maxCharge)))...)
		}
		from, count = at, cost{}
		return pos
	}
	// branch records a branch to the frame depth labels out.
	branch := func(depth uint32) {
		if depth < uint32(len(frames)) {
			fr := &frames[len(frames)-1-int(depth)]
			if fr.loop {
				fr.atBack = fr.atBack.max(count)
			} else {
				fr.atEnd = fr.atEnd.max(count)
				fr.branched = true
			}
		}
	}
	// returns: a branch to one of labels leaves the function.
	returns := func() bool {
		for _, l := range labels {
			if l >= uint32(len(frames)) {
				return true
			}
		}
		return false
	}
	for r.Off < len(r.B) && r.Err == nil {
		at := r.Off
		op := r.Byte()
		labels = labels[:0]
		var sub uint32
		switch op {
		case 0x0c, 0x0d: // br, br_if
			labels = append(labels, r.U32())
		case 0x0e: // br_table
			n := r.U32()
			for i := uint32(0); i <= n && r.Err == nil; i++ {
				labels = append(labels, r.U32())
			}
		case 0xfc:
			sub = r.U32()
			r.Off = at
			r.Byte()
			fallthrough
		default:
			if err := skipImmediates(r, op); err != nil {
				return nil, err
			}
		}
		exits := op == 0x0f || op == 0x12 || op == 0x13 || (op == 0x0b && len(frames) == 0) ||
			(op >= 0x0c && op <= 0x0e && returns())
		switch {
		case count.own >= straight:
			insert(at)
		case interp:
			// A call returns through a check (save and restore, or
			// flagCheck), and so does a return to the module's own code;
			// only a tail call, which does not return, is checked before.
			if (op == 0x12 || op == 0x13) && checked == 0 {
				insert(at)
			}
		case isCall(op) && checked == 0:
			insert(at)
		case exits && count.own > leafUnits:
			insert(at)
		}
		units := instrUnits(op, r.Off-at)
		if bulk, memory := isBulk(sub); op == 0xfc && bulk {
			site, err := x.bulk.site(r.B[at:r.Off], memory, length)
			if err != nil {
				return nil, err
			}
			out = append(append(out, r.B[from:at]...), site...)
			from = r.Off
			count.charge += callUnits
			if memory {
				units += fastUnits
			}
		}
		if isCall(op) {
			count.charge += callUnits
		}
		// The depth is the caller's again once a call of the module's own
		// functions returns; a tail call gives up its caller's frame. A
		// function of the host's may run long, whatever it is charged: the
		// flag is read once it returns (see checker.flagCheck), and after
		// a call_indirect where a table may hold one.
		imported := op == 0x10 && (&wasmbin.Reader{B: r.B, Off: at + 1}).U32() < x.shape.importedFuncs
		switch {
		case op == 0x11 || op == 0x10 && !imported:
			out = append(append(out, r.B[from:at]...), x.check.save(saved)...)
			out = append(append(out, r.B[at:r.Off]...), x.check.restore(saved)...)
			if op == 0x11 && x.shape.indirectImports && !interp {
				// The interpreter's restore holds the check already.
				out = append(out, x.check.flagCheck()...)
			}
			from = r.Off
			if interp {
				count = cost{}
			}
		case imported:
			out = append(append(out, r.B[from:r.Off]...), x.check.flagCheck()...)
			from = r.Off
			if interp {
				count = cost{}
			}
		case op == 0x12 || op == 0x13:
			out = append(append(out, r.B[from:at]...), x.check.enter(-frame)...)
			from = at
		}
		count.own += units
		count.charge += units
		switch op {
		case 0x02: // block
			frames = append(frames, pathFrame{})
		case 0x04: // if: the condition may skip to else or end
			frames = append(frames, pathFrame{isIf: true, atIf: count})
		case 0x03: // loop: the check opens its body if it can repeat
			rep := scan.repeats[loop]
			loop++
			fr := pathFrame{loop: true, checked: rep}
			switch {
			case rep && interp:
				// The interpreter checks at the header itself.
				checked++
				fr.atBack, fr.patch = count, -1
				out = append(out, r.B[from:r.Off]...)
				from, count = r.Off, cost{}
			case rep:
				checked++
				// Charged once the body is read: what a path from before
				// the loop, or round it, ran since its last check.
				fr.atBack, fr.patch = count, insert(r.Off)
			}
			frames = append(frames, fr)
		case 0x05: // else: the then arm goes to the end; the else arm starts
			if n := len(frames); n > 0 {
				fr := &frames[n-1]
				fr.atEnd, count, fr.hasElse, fr.branched = fr.atEnd.max(count), fr.atIf, true, true
			}
		case 0x0b: // end of a frame, or (the last) of the function
			if n := len(frames); n > 0 {
				fr := frames[n-1]
				frames = frames[:n-1]
				if fr.checked {
					checked--
					if fr.patch >= 0 {
						copy(out[fr.patch:], appendCharge(nil, uint32(min(fr.atBack.charge, maxCharge))))
					}
				}
				if !fr.loop {
					if fr.branched {
						count = count.max(fr.atEnd)
					}
					if fr.isIf && !fr.hasElse {
						count = count.max(fr.atIf)
					}
				}
			}
		case 0x0c, 0x0e: // br, br_table: what follows is not reached
			for _, l := range labels {
				branch(l)
			}
			count = cost{}
		case 0x0d: // br_if
			branch(labels[0])
		case 0x00, 0x0f, 0x12, 0x13: // unreachable, return and tail calls
			count = cost{}
		}
	}
	return append(out, r.B[from:]...), nil
}

// pathFrame is an open block, if or loop, as rewriteFunc follows paths.
type pathFrame struct {
	loop, checked bool // a loop; one with a check at its header
	isIf, hasElse bool
	branched      bool // atEnd holds a path: a branch, or the then arm
	atIf          cost // since a check where the arms start
	atEnd         cost // the most over the branches to the end
	atBack        cost // a checked loop: the most over the paths to its check
	patch         int  // a checked loop: where its check's charge is in out
}

// errGlobal is the error for a reference to a global the module does not
// have: the rewrite adds globals, so such a module would become valid, and
// able to reach the rewrite's own.
func errGlobal(g uint32) error {
	return fmt.Errorf("%w: global %d does not exist", wasmbin.ErrMalformed, g)
}

// errIndex is the error for a reference to a type, function or local the
// module does not have: the rewrite adds some, so such a module would
// become valid (a call of an added function, a read of an added local).
func errIndex(what string, i uint32) error {
	return fmt.Errorf("%w: %s %d does not exist", wasmbin.ErrMalformed, what, i)
}

// constExpr skips a constant expression, refusing references to globals
// and functions the module does not have.
func (m *shape) constExpr(r *wasmbin.Reader) error {
	for r.Err == nil {
		switch op := r.Byte(); op {
		case 0x0b:
			return nil
		case 0x23:
			if g := r.U32(); g >= m.globals && r.Err == nil {
				return errGlobal(g)
			}
		case 0xd2:
			f := r.U32()
			if f >= m.funcs() && r.Err == nil {
				return errIndex("function", f)
			}
			m.nameFunc(wasmbin.KindFunc, f)
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

// funcScan is what rewriteFunc needs to know of a function's code before
// it rewrites it.
type funcScan struct {
	repeats    []bool // for each loop, in order: whether a branch targets it
	calls      bool   // whether it calls
	memoryBulk bool   // whether it has a memory bulk instruction
	// depth is the most blocks, loops and ifs open at once; targets,
	// of all br_table instructions, defaults included (see Bound).
	depth, targets int
}

// scanFunc decodes code once, following its structure. A loop no branch
// targets runs its body once. Code that names a global, function, type or
// local (of locals) that the module does not have is malformed.
func scanFunc(code []byte, m *shape, locals uint32) (funcScan, error) {
	var s funcScan
	// Each open block, loop or if: the loop's number, or -1.
	var frames []int
	target := func(depth uint32) {
		if depth < uint32(len(frames)) {
			if l := frames[len(frames)-1-int(depth)]; l >= 0 {
				s.repeats[l] = true
			}
		}
	}
	r := &wasmbin.Reader{B: code}
	for r.Off < len(r.B) && r.Err == nil {
		switch op := r.Byte(); op {
		case 0x02, 0x04: // block, if
			if err := blockType(r, m); err != nil {
				return s, err
			}
			frames = append(frames, -1)
			s.depth = max(s.depth, len(frames))
		case 0x03: // loop
			if err := blockType(r, m); err != nil {
				return s, err
			}
			frames = append(frames, len(s.repeats))
			s.repeats = append(s.repeats, false)
			s.depth = max(s.depth, len(frames))
		case 0x0b: // end: of a frame, or (the last) of the function
			if len(frames) > 0 {
				frames = frames[:len(frames)-1]
			}
		case 0x0c, 0x0d: // br, br_if
			target(r.U32())
		case 0x0e: // br_table
			n := r.U32()
			s.targets += int(n) + 1
			for i := uint32(0); i <= n && r.Err == nil; i++ {
				target(r.U32())
			}
		case 0x23, 0x24: // global.get, global.set
			if g := r.U32(); g >= m.globals && r.Err == nil {
				return s, errGlobal(g)
			}
		case 0x20, 0x21, 0x22: // local.get, local.set, local.tee
			if l := r.U32(); l >= locals && r.Err == nil {
				return s, errIndex("local", l)
			}
		case 0x10, 0x12, 0xd2: // call, return_call, ref.func
			s.calls = s.calls || op != 0xd2
			if f := r.U32(); f >= m.funcs() && r.Err == nil {
				return s, errIndex("function", f)
			}
		case 0x11, 0x13: // call_indirect, return_call_indirect: type, table
			s.calls = true
			if t := r.U32(); t >= m.types() && r.Err == nil {
				return s, errIndex("type", t)
			}
			r.U32()
		default:
			if isCall(op) {
				s.calls = true
			}
			if op == 0xfc {
				sub := (&wasmbin.Reader{B: r.B, Off: r.Off}).U32()
				if _, memory := isBulk(sub); memory {
					s.memoryBulk = true
				}
			}
			if err := skipImmediates(r, op); err != nil {
				return s, err
			}
		}
	}
	if r.Err != nil {
		return s, fmt.Errorf("%w: %v", wasmbin.ErrMalformed, r.Err)
	}
	return s, nil
}

// blockType skips the block type of a block, loop or if, refusing a type
// index the module does not have.
func blockType(r *wasmbin.Reader, m *shape) error {
	at := r.Off
	r.BlockType()
	if r.Err != nil || r.Off == at+1 && (r.B[at] == 0x40 || wasmbin.SimpleType(r.B[at])) {
		return nil
	}
	// A type index: a signed 33-bit number, of at most 5 bytes.
	var v int64
	for i, b := range r.B[at:r.Off] {
		v |= int64(b&0x7f) << (7 * i)
	}
	if n := r.Off - at; n < 5 && r.B[r.Off-1]&0x40 != 0 {
		v -= 1 << (7 * n) // negative: not a type index
	}
	if v < 0 || v >= int64(m.types()) {
		return errIndex("type", uint32(v))
	}
	return nil
}

// skipImmediates skips what follows op in the code. The rewrite does not
// run vector (SIMD) code, nor instructions wasmbin does not decode.
func skipImmediates(r *wasmbin.Reader, op byte) error {
	if op == 0xfd {
		return fmt.Errorf("%w: opcode %#x", ErrUnsupported, op)
	}
	if err := r.SkipImmediates(op); err != nil {
		return fmt.Errorf("%w: opcode %#x: %v", ErrUnsupported, op, err)
	}
	return nil
}
