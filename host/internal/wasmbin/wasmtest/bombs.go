package wasmtest

import "github.com/wasmhist/wasmhist/host/internal/wasmbin"

// Compile bombs: small functions whose compilation costs far more time or
// memory than their size suggests, each exported as "run". Bomb makes a
// module of one with a memory, and of the functions given.

// BrTable is a function of blocks nested blocks, in the innermost of which
// tables br_table instructions, each in a block of its own, have targets
// targets each (the default included), spread over the blocks; after each
// block ends it reads locals locals.
func BrTable(blocks, tables, targets, locals int) Func {
	var code []byte
	for range blocks {
		code = append(code, 0x02, 0x40)
	}
	for range tables {
		// Each table in a block of its own, so that the next is reached.
		code = append(code, 0x02, 0x40, 0x41, 0x00, 0x0e) // block, i32.const 0, br_table
		code = wasmbin.AppendU32(code, uint32(targets-1))
		for i := range targets {
			code = wasmbin.AppendU32(code, uint32(i%(blocks+1)))
		}
		code = append(code, 0x0b)
	}
	for range blocks {
		code = append(code, 0x0b)
		for l := range locals {
			code = wasmbin.AppendU32(append(code, 0x20), uint32(l)) // local.get
			code = append(code, 0x1a)                               // drop
		}
	}
	return bomb(code, locals)
}

// Nested is a function of depth nested instructions op: block (0x02),
// loop (0x03) or if (0x04, each on a constant condition).
func Nested(op byte, depth int) Func {
	var code []byte
	for range depth {
		if op == 0x04 {
			code = append(code, 0x41, 0x01) // i32.const 1
		}
		code = append(code, op, 0x40)
	}
	for range depth {
		code = append(code, 0x0b)
	}
	return bomb(code, 0)
}

// Sequence is a function of n empty ifs one after the other, followed by
// reads of locals locals: its compilation grows with n times locals, and
// neither count alone is unusual.
func Sequence(n, locals int) Func {
	var code []byte
	for range n {
		code = append(code, 0x41, 0x00, 0x04, 0x40, 0x0b) // i32.const 0, if, end
	}
	for l := range locals {
		code = wasmbin.AppendU32(append(code, 0x20), uint32(l)) // local.get
		code = append(code, 0x1a)                               // drop
	}
	return bomb(code, locals)
}

// Straight is a function of n instructions "i32.const 1; drop" in a row.
func Straight(n int) Func {
	code := make([]byte, 0, 3*n)
	for range n {
		code = append(code, 0x41, 0x01, 0x1a)
	}
	return bomb(code, 0)
}

func bomb(code []byte, locals int) Func {
	ls := make([]byte, locals)
	for i := range ls {
		ls[i] = I32
	}
	return Func{Locals: ls, Code: code, Export: "run"}
}

// Bomb is a module of f and then others, with a memory.
func Bomb(f Func, others ...Func) []byte {
	return Module{Funcs: append([]Func{f}, others...), Memory: true}.Bytes()
}
