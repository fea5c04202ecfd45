package instrument

import (
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// A bulk instruction (memory.fill, memory.copy, memory.init, table.fill,
// table.copy, table.init) does work in proportion to an operand: one
// memory.fill of 16 MiB takes milliseconds, and the runtime runs it without
// a point where the Go scheduler can stop it. Counting such an instruction
// as one instruction let a loop of them run for a minute between two visits
// to the host. So the rewrite splits the long ones into chunks, with a
// check before each chunk that charges the chunk's cost:
//
//   - a memory instruction of at most fastBytes runs where it is, behind a
//     comparison, and the stretch of code around it is charged fastUnits;
//   - a longer one, and every table instruction, calls a helper function
//     the rewrite adds (one per distinct instruction), which runs it in
//     chunks of chunkBytes (chunkEntries), checking before each.
//
// A helper traps exactly when the instruction would: before any chunk it
// runs the instruction with length zero at the far end of both ranges,
// which traps if and only if the whole range is out of bounds, and an
// address that overflows 32 bits runs the instruction itself (which traps,
// writing nothing). memory.copy and table.copy run their chunks from the
// high end when the destination is above the source, so that overlapping
// ranges copy as one move would.
const (
	fastBytes    = 1 << 12
	chunkBytes   = 1 << 16
	chunkEntries = 1 << 12
	// unitBytes: one unit of the budget pays for this many bytes of a
	// memory instruction; table entries cost a unit each.
	unitBytes = 16
	fastUnits = fastBytes / unitBytes
)

// Sub-opcodes of the bulk instructions after the 0xfc prefix.
const (
	subMemoryInit = 8
	subMemoryCopy = 10
	subMemoryFill = 11
	subTableInit  = 12
	subTableCopy  = 14
	subTableFill  = 17
)

// isBulk: a bulk instruction that the rewrite runs in chunks; memory says
// whether it is a memory one (with an inline fast path).
func isBulk(sub uint32) (bulk, memory bool) {
	switch sub {
	case subMemoryInit, subMemoryCopy, subMemoryFill:
		return true, true
	case subTableInit, subTableCopy, subTableFill:
		return true, false
	}
	return false, false
}

// bulkHelpers are the helper functions a rewrite adds, one per distinct
// bulk instruction (its bytes, immediates included).
type bulkHelpers struct {
	funcBase uint32 // the function index of the first helper
	typeBase uint32 // the type index of the first of helperTypes
	tables   []byte // the reference type of each table, imported first
	index    map[string]uint32
	instrs   [][]byte
}

// helperTypes are the types the rewrite adds when a module has bulk
// instructions: (i32 i32 i32) -> () for every helper but table.fill, and
// the types of table.fill's helper for each reference type.
var helperTypes = [][]byte{
	{0x60, 3, 0x7f, 0x7f, 0x7f, 0},
	{0x60, 3, 0x7f, 0x70, 0x7f, 0},
	{0x60, 3, 0x7f, 0x6f, 0x7f, 0},
}

// call returns the index of the helper for instr, adding it if new.
func (h *bulkHelpers) call(instr []byte) (uint32, error) {
	if i, ok := h.index[string(instr)]; ok {
		return h.funcBase + i, nil
	}
	if sub, imm := bulkOperands(instr); sub == subTableFill && int(imm) >= len(h.tables) {
		return 0, fmt.Errorf("%w: table.fill of table %d, which does not exist", wasmbin.ErrMalformed, imm)
	}
	if h.index == nil {
		h.index = map[string]uint32{}
	}
	i := uint32(len(h.instrs))
	h.index[string(instr)] = i
	h.instrs = append(h.instrs, instr)
	return h.funcBase + i, nil
}

// bulkOperands decodes a bulk instruction's sub-opcode and its first
// immediate (the table of table.fill).
func bulkOperands(instr []byte) (sub, first uint32) {
	r := &wasmbin.Reader{B: instr, Off: 1}
	return r.U32(), r.U32()
}

// typeOf is the index of the type of the helper for instr.
func (h *bulkHelpers) typeOf(instr []byte) uint32 {
	if sub, table := bulkOperands(instr); sub == subTableFill {
		if h.tables[table] == 0x6f {
			return h.typeBase + 2
		}
		return h.typeBase + 1
	}
	return h.typeBase
}

// site returns the code that replaces instr in a function: for a memory
// instruction, the inline fast path (with n, a local of the function's,
// holding the length), else a call of the helper.
func (h *bulkHelpers) site(instr []byte, memory bool, n uint32) ([]byte, error) {
	fn, err := h.call(instr)
	if err != nil {
		return nil, err
	}
	if !memory {
		return wasmbin.AppendU32([]byte{0x10}, fn), nil
	}
	// local.tee n  local.get n  i32.const fastBytes  i32.gt_u
	// if (i32 i32 i32) call helper  else instr  end
	b := wasmbin.AppendU32([]byte{0x22}, n)
	b = wasmbin.AppendU32(append(b, 0x20), n)
	b = append(wasmbin.AppendS32(append(b, 0x41), fastBytes), 0x4b, 0x04)
	b = wasmbin.AppendS32(b, int32(h.typeBase))
	b = wasmbin.AppendU32(append(b, 0x10), fn)
	b = append(append(b, 0x05), instr...)
	return append(b, 0x0b), nil
}

// bodies returns the code section entries of the helpers, in order.
func (h *bulkHelpers) bodies(c checker) []byte {
	var out []byte
	for _, instr := range h.instrs {
		body := helperBody(instr, c)
		out = append(wasmbin.AppendU32(out, uint32(len(body))), body...)
	}
	return out
}

// helperBody is the function that runs instr, with parameters a, b, n
// (destination, source or value, length), in checked chunks.
func helperBody(instr []byte, c checker) []byte {
	sub, _ := bulkOperands(instr)
	_, memory := isBulk(sub)
	chunk, units := int32(chunkEntries), uint32(chunkEntries)
	if memory {
		chunk, units = chunkBytes, chunkBytes/unitBytes
	}
	// Whether b is an address that advances with a (not a fill's value).
	moves := sub != subMemoryFill && sub != subTableFill
	const a, b, n = 0, 1, 2
	var w asm
	w.op(0x00) // no locals
	// An end past 2^32 - 1: the instruction itself traps.
	w.get(a).get(n).op(0x6a).get(a).op(0x49) // a+n <u a
	if moves {
		w.get(b).get(n).op(0x6a).get(b).op(0x49).op(0x72) // or b+n <u b
	}
	w.op(0x04, 0x40).get(a).get(b).get(n).raw(instr).op(0x0f, 0x0b)
	// The bounds of the whole ranges, checked by an empty instruction at
	// their far ends.
	w.get(a).get(n).op(0x6a).get(b)
	if moves {
		w.get(n).op(0x6a)
	}
	w.i32(0).raw(instr)
	if moves {
		// Destination above the source: chunks from the high end.
		w.get(a).get(b).op(0x4b, 0x04, 0x40) // if a >u b
		w.op(0x03, 0x40).raw(c.code(units))
		w.get(n).i32(chunk).op(0x4b, 0x04, 0x40)
		w.get(n).i32(chunk).op(0x6b).set(n)
		w.get(a).get(n).op(0x6a).get(b).get(n).op(0x6a).i32(chunk).raw(instr)
		w.op(0x0c, 0x01, 0x0b, 0x0b)                     // br loop, end if, end loop
		w.get(a).get(b).get(n).raw(instr).op(0x0f, 0x0b) // the rest; return; end if
	}
	w.op(0x03, 0x40).raw(c.code(units))
	w.get(n).i32(chunk).op(0x4b, 0x04, 0x40)
	w.get(a).get(b).i32(chunk).raw(instr)
	w.get(a).i32(chunk).op(0x6a).set(a)
	if moves {
		w.get(b).i32(chunk).op(0x6a).set(b)
	}
	w.get(n).i32(chunk).op(0x6b).set(n)
	w.op(0x0c, 0x01, 0x0b, 0x0b)
	w.get(a).get(b).get(n).raw(instr)
	return w.op(0x0b).b
}

// asm appends instructions.
type asm struct{ b []byte }

func (w *asm) op(ops ...byte) *asm           { w.b = append(w.b, ops...); return w }
func (w *asm) raw(code []byte) *asm          { w.b = append(w.b, code...); return w }
func (w *asm) get(local uint32) *asm         { w.b = wasmbin.AppendU32(append(w.b, 0x20), local); return w }
func (w *asm) set(local uint32) *asm         { w.b = wasmbin.AppendU32(append(w.b, 0x21), local); return w }
func (w *asm) i32(v int32) *asm              { w.b = wasmbin.AppendS32(append(w.b, 0x41), v); return w }
func (w *asm) global(op byte, g uint32) *asm { w.b = wasmbin.AppendU32(append(w.b, op), g); return w }
