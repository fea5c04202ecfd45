package wasmbin

import "errors"

// ErrUnknownOpcode: an instruction SkipImmediates does not decode.
var ErrUnknownOpcode = errors.New("unknown opcode")

// SimpleType reports a number, vector or reference type of one byte.
func SimpleType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

// BlockType skips the block type of a block, loop or if.
func (r *Reader) BlockType() {
	if r.Off < len(r.B) && (r.B[r.Off] == 0x40 || SimpleType(r.B[r.Off])) {
		r.Off++
		return
	}
	r.SkipLEB(5) // a type index, as a signed 33-bit number
}

// MemArg skips the memory argument of a load or store.
func (r *Reader) MemArg() {
	if r.U32()&0x40 != 0 { // a memory index follows (multiple memories)
		r.U32()
	}
	r.U32()
}

// SkipImmediates skips what follows op in code: of every instruction of
// WebAssembly 2.0 and of tail calls and multiple memories. It returns
// ErrUnknownOpcode for any other.
func (r *Reader) SkipImmediates(op byte) error {
	switch immediates[op] {
	case immNone:
	case immU32:
		r.U32()
	case immBlockType:
		r.BlockType()
	case immBrTable:
		n := r.U32()
		for i := uint32(0); i <= n && r.Err == nil; i++ {
			r.U32()
		}
	case immTwoU32:
		r.U32()
		r.U32()
	case immSelect:
		r.Skip(int(min(r.U32(), uint32(len(r.B)+1))))
	case immMemArg:
		r.MemArg()
	case immS32:
		r.SkipLEB(5)
	case immS64:
		r.SkipLEB(10)
	case immF32:
		r.Skip(4)
	case immF64:
		r.Skip(8)
	case immByte:
		r.Byte()
	case immPrefixed:
		return r.skipPrefixed()
	case immSIMD:
		return r.skipSIMD()
	default:
		return ErrUnknownOpcode
	}
	return nil
}

// What follows an opcode in code (SkipImmediates).
const (
	immUnknown   = iota
	immNone      // nothing
	immU32       // an index or a label
	immBlockType // block, loop, if
	immBrTable   // a vector of labels and the default
	immTwoU32    // call_indirect, return_call_indirect: type, table
	immSelect    // select with types: a vector of types
	immMemArg    // loads and stores
	immS32       // i32.const
	immS64       // i64.const
	immF32       // f32.const
	immF64       // f64.const
	immByte      // ref.null: a reference type
	immPrefixed  // 0xfc
	immSIMD      // 0xfd
)

// immediates is what follows each opcode, looked up rather than tested
// range by range: a module's code has millions of instructions.
var immediates = func() (t [256]byte) {
	for op := 0; op < 256; op++ {
		switch {
		case op == 0x02, op == 0x03, op == 0x04: // block, loop, if
			t[op] = immBlockType
		case op == 0x0c, op == 0x0d, // br, br_if
			op == 0x10, op == 0x12, // call, return_call
			op >= 0x20 && op <= 0x26, // local.*, global.*, table.get, table.set
			op == 0xd2,               // ref.func
			op == 0x3f, op == 0x40:   // memory.size, memory.grow
			t[op] = immU32
		case op == 0x0e: // br_table
			t[op] = immBrTable
		case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
			t[op] = immTwoU32
		case op == 0x1c: // select with types
			t[op] = immSelect
		case op >= 0x28 && op <= 0x3e: // loads and stores
			t[op] = immMemArg
		case op == 0x41:
			t[op] = immS32
		case op == 0x42:
			t[op] = immS64
		case op == 0x43:
			t[op] = immF32
		case op == 0x44:
			t[op] = immF64
		case op == 0xd0: // ref.null
			t[op] = immByte
		case op == 0xfc:
			t[op] = immPrefixed
		case op == 0xfd:
			t[op] = immSIMD
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
			op >= 0x45 && op <= 0xc4, op == 0xd1:
			t[op] = immNone
		}
	}
	return t
}()

// skipPrefixed skips an 0xfc instruction: saturating truncations, bulk
// memory and table operations.
func (r *Reader) skipPrefixed() error {
	switch sub := r.U32(); {
	case sub <= 7: // trunc_sat
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.U32()
		r.U32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
		// data.drop, memory.fill, elem.drop, table.grow, table.size, table.fill
		r.U32()
	default:
		return ErrUnknownOpcode
	}
	return nil
}

// skipSIMD skips an 0xfd instruction.
func (r *Reader) skipSIMD() error {
	switch sub := r.U32(); {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		r.MemArg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.Skip(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.Byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.MemArg()
		r.Byte()
	case sub <= 0xff:
		// no immediates
	default:
		return ErrUnknownOpcode
	}
	return nil
}
