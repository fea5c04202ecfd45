package instrument

import (
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// rewriteCode returns the code section body with check inserted at the
// entry of every function that does not start with a loop, and after the
// block type of every loop.
func rewriteCode(body []byte, check []byte) ([]byte, error) {
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
		if fn, err = rewriteFunc(fn[:0], f, check); err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = wasmbin.AppendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: code section: %v", wasmbin.ErrMalformed, r.Err)
	}
	return out, nil
}

func rewriteFunc(out []byte, f *wasmbin.Reader, check []byte) ([]byte, error) {
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
	if !startsWithLoop(f.B[f.Off:]) {
		out = append(out, check...)
	}
	from := f.Off
	for f.Off < len(f.B) && f.Err == nil {
		op := f.Byte()
		if err := skipImmediates(f, op); err != nil {
			return nil, err
		}
		if op == 0x03 && f.Err == nil { // loop: the check opens its body
			out = append(out, f.B[from:f.Off]...)
			out = append(out, check...)
			from = f.Off
		}
	}
	if f.Err != nil {
		return nil, fmt.Errorf("%w: %v", wasmbin.ErrMalformed, f.Err)
	}
	return append(out, f.B[from:]...), nil
}

// startsWithLoop: the code opens, before anything else, blocks and loops
// of which one is a loop, so entering the function passes a loop header.
func startsWithLoop(code []byte) bool {
	r := &wasmbin.Reader{B: code}
	for r.Err == nil {
		switch op := r.Byte(); op {
		case 0x03:
			return true
		case 0x02:
			blockType(r)
		default:
			return false
		}
	}
	return false
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
		op == 0xd2: // ref.func
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
