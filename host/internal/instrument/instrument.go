// Package instrument rewrites a WebAssembly module so that the host can
// stop its code at any moment, and the Go runtime can stop the world while
// it runs, without the code leaving for the host at every loop.
//
// The runtime's own preemption calls out of the guest at every loop header,
// which a Go guest, whose every function is a loop, pays at every call. The
// rewritten module instead counts down a budget in a global of its own at
// the header of every loop that a branch can repeat, and before every call
// that is not inside such a loop. When the budget runs out, the code
// leaves for the host once (by growing its memory by zero pages, which the
// runtime serves in Go, where the Go scheduler can preempt it), then reads
// an interrupt flag, an exported global the host sets from another
// goroutine when the call's context ends, and traps if it is set.
//
// Any run that does not end passes such checks without bound (see
// rewriteCode), so it reaches the flag within Budget checks.
//
// The rewrite also joins the module's data segments where only a few zero
// bytes lie between them (see coalesceData): a Go module has tens of
// thousands, which the runtime decodes on every load and copies on every
// instance. And it bounds the module's tables (see BoundTables), which a
// module not rewritten gets alone.
package instrument

import (
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// InterruptExport is the exported mutable i32 global the host sets to a
// non-zero value to stop the module's code.
const InterruptExport = "wasmhist:interrupt"

// DepthExport is the exported mutable i32 global that holds how deep the
// module's calls in flight are, in units of StackUnit bytes of estimated
// stack. The host sets it to zero before each call.
const DepthExport = "wasmhist:depth"

// MaxDepth is how deep, in StackUnit, calls may nest: a function entered
// past it traps. The runtime keeps a call's stack in one Go slice, which it
// copies whole to grow, and walks every frame when a call traps; neither
// can be stopped, so the stack must stay small: with frames 300 bytes
// large a million-deep recursion made calls end 100 ms after their
// deadline. A frame is estimated from the function's size (see
// FrameUnits): the runtime's frames grow with the code (a spill slot per
// value), 18 bytes for a function of 14 bytes and 4.6 KB for one of 2.7 KB.
const MaxDepth = 1 << 17

// StackUnit is the unit of depth, in bytes: MaxDepth of them is 32 MiB.
const StackUnit = 256

// FrameUnits is the estimate of the stack a function's frame takes, in
// StackUnit, from the bytes of its code (the instructions after its
// locals) and how many parameters and locals it declares: 16 bytes per byte of code (a value at most per byte, a slot of
// 8 bytes, twice for the runtime's own temporaries), 8 per parameter and
// local, and 256 for the frame's fixed part, rounded up.
func FrameUnits(codeBytes int, paramsAndLocals uint64) int32 {
	b := 16*uint64(codeBytes) + 8*paramsAndLocals + 256
	return int32(min((b+StackUnit-1)/StackUnit, MaxDepth+1))
}

// Version changes whenever the rewrite does, so that rewritten modules kept
// by an earlier version are not used.
const Version = 17

// Budget is how many units of code (see cost) run between two visits to
// the host: a unit is a byte of code, 16 bytes of a memory instruction or
// an entry of a table instruction.
const Budget = 1 << 16

// ErrUnsupported: the module uses an encoding this package does not
// rewrite (SIMD, threads, exceptions, typed references), has no memory or
// a start function, or already exports InterruptExport. The host then runs it unrewritten, with
// the runtime's own preemption.
var ErrUnsupported = errors.New("instrument: module not supported")

// Module returns a copy of wasm with the checks added. It fails with
// ErrUnsupported, or wasmbin.ErrMalformed for a binary that does not
// decode; wasm itself is not changed.
func Module(wasm []byte) ([]byte, error) { return rewrite(wasm, false, nil) }

// ForInterpreter is Module for wazero's interpreter, run with its own
// preemption (WithCloseOnContextDone), which checks at every loop header
// whether the call's context ended, atomically. There the host does not
// set the flag, which the interpreter reads as a plain Go variable from
// the guest's goroutine (a data race), and the Go scheduler preempts the
// guest anywhere, so the rewrite counts no budget: a check is an empty
// loop, where the interpreter makes its check,
//
//	loop end
//
// after every call (of the host's functions and, once its depth is
// restored, of the module's own), before a tail call outside a checked
// loop, and every straight units of a function's own code between them.
// A loop's header needs none: the interpreter checks there itself. The
// depth, the chunks of bulk instructions and the tables' bounds are as
// Module's.
//
// bound, unless nil, is called with the shape of each function before it
// is rewritten, and its error ends the rewrite (wrapped, naming the
// function): the static bounds checked in the rewrite's own pass over the
// code, which reading the code once more for them would cost.
func ForInterpreter(wasm []byte, bound Bound) ([]byte, error) { return rewrite(wasm, true, bound) }

// Bound checks the shape of a function's code: depth, the most blocks,
// loops and ifs open at once; targets, how many the function's br_table
// instructions have in all, defaults included.
type Bound func(depth, targets int) error

func rewrite(wasm []byte, interpreter bool, bound Bound) ([]byte, error) {
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, err
	}
	var m shape
	rank := 0
	var code []byte
	for _, s := range secs {
		if s.ID != wasmbin.SectionCustom {
			// In order, once each: so that a global section is read
			// before anything that refers to globals.
			if order[s.ID] <= rank {
				return nil, fmt.Errorf("%w: section %d out of order", wasmbin.ErrMalformed, s.ID)
			}
			rank = order[s.ID]
		}
		r := &wasmbin.Reader{B: s.Body}
		var err error
		switch s.ID {
		case wasmbin.SectionType:
			err = m.readTypes(r)
		case wasmbin.SectionImport:
			err = m.readImports(r)
		case wasmbin.SectionFunction:
			m.readFunctions(r)
		case wasmbin.SectionTable:
			m.readTables(r)
		case wasmbin.SectionMemory:
			if r.U32() > 0 {
				m.memory = true
			}
		case wasmbin.SectionDataCount:
			m.dataCount = true
		case wasmbin.SectionGlobal:
			err = m.readGlobals(r)
		case wasmbin.SectionExport:
			err = m.readExports(r)
		case wasmbin.SectionElement:
			err = m.readElements(r)
		case wasmbin.SectionData:
			err = m.readData(r)
		case wasmbin.SectionCode:
			code = s.Body
		case wasmbin.SectionStart:
			// A start function runs while the module is instantiated,
			// before the host has its flag; wazero's preemption covers it.
			m.unsupported = "a start function"
		}
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", s.ID, err)
		}
		if m.unsupported != "" {
			return nil, fmt.Errorf("%w: %s", ErrUnsupported, m.unsupported)
		}
		if r.Err != nil {
			return nil, fmt.Errorf("%w: section %d: %v", wasmbin.ErrMalformed, s.ID, r.Err)
		}
		if r.Off != len(r.B) && readWhole[s.ID] {
			// Entries appended after junk would make it valid.
			return nil, fmt.Errorf("%w: section %d: %d bytes after its entries", wasmbin.ErrMalformed, s.ID, len(r.B)-r.Off)
		}
	}
	if !m.memory {
		return nil, fmt.Errorf("%w: no linear memory", ErrUnsupported)
	}
	x := rewriter{
		check:   checker{counter: m.globals, flag: m.globals + 1, depth: m.globals + 2, loop: interpreter},
		globals: m.globals,
		shape:   &m,
		bound:   bound,
		bulk: bulkHelpers{
			funcBase: m.importedFuncs + uint32(len(m.funcTypes)),
			typeBase: uint32(len(m.typeParams)),
			tables:   m.tables,
		},
	}
	var codeOut []byte
	if code != nil {
		if codeOut, err = x.rewriteCode(code); err != nil {
			return nil, err
		}
	}
	helpers := uint32(len(x.bulk.instrs))

	secs = ensure(secs, wasmbin.SectionGlobal)
	secs = ensure(secs, wasmbin.SectionExport)
	// Each section's new body, in parts (the code section's count, then
	// its functions, then the helpers'), written once into a buffer of
	// the module's size: a few megabytes, copied and grown, were most of
	// what a rewrite allocated.
	type newSection struct {
		id    byte
		parts [][]byte
	}
	news := make([]newSection, 0, len(secs))
	for _, s := range secs {
		body := s.Body
		switch s.ID {
		case wasmbin.SectionCustom:
			// Debug information addresses code by offset, which the
			// checks shift; the runtime would report wrong lines.
			if name := (&wasmbin.Reader{B: body}).Name(); len(name) > 7 && name[:7] == ".debug_" {
				continue
			}
		case wasmbin.SectionType:
			if helpers > 0 {
				body = appendVec(body, uint32(len(helperTypes)), func(b []byte) []byte {
					for _, t := range helperTypes {
						b = append(b, t...)
					}
					return b
				})
			}
		case wasmbin.SectionFunction:
			body = appendVec(body, helpers, func(b []byte) []byte {
				for _, instr := range x.bulk.instrs {
					b = wasmbin.AppendU32(b, x.bulk.typeOf(instr))
				}
				return b
			})
		case wasmbin.SectionGlobal:
			body = appendVec(body, 3, func(b []byte) []byte {
				// The counter starts with a full budget; the flag clear,
				// the depth nought.
				b = append(b, 0x7f, 0x01, 0x41)
				b = wasmbin.AppendS32(b, Budget)
				b = append(b, 0x0b)
				b = append(b, 0x7f, 0x01, 0x41, 0x00, 0x0b)
				return append(b, 0x7f, 0x01, 0x41, 0x00, 0x0b)
			})
		case wasmbin.SectionExport:
			body = appendVec(body, 2, func(b []byte) []byte {
				b = wasmbin.AppendName(b, InterruptExport)
				b = wasmbin.AppendU32(append(b, 0x03), x.check.flag)
				b = wasmbin.AppendName(b, DepthExport)
				return wasmbin.AppendU32(append(b, 0x03), x.check.depth)
			})
		case wasmbin.SectionCode:
			r := &wasmbin.Reader{B: codeOut}
			count := r.U32()
			news = append(news, newSection{s.ID, [][]byte{
				wasmbin.AppendU32(nil, count+helpers), codeOut[r.Off:], x.bulk.bodies(x.check),
			}})
			continue
		case wasmbin.SectionData:
			if !m.importedMemory && !m.dataCount {
				body = coalesceData(body)
			}
		case wasmbin.SectionTable:
			if body, err = boundTables(body); err != nil {
				return nil, err
			}
		}
		news = append(news, newSection{s.ID, [][]byte{body}})
	}
	size := len(wasmbin.Header)
	for _, s := range news {
		n := 0
		for _, p := range s.parts {
			n += len(p)
		}
		size += 1 + len(wasmbin.AppendU32(nil, uint32(n))) + n
	}
	out := append(make([]byte, 0, size), wasmbin.Header...)
	for _, s := range news {
		n := 0
		for _, p := range s.parts {
			n += len(p)
		}
		out = wasmbin.AppendU32(append(out, s.id), uint32(n))
		for _, p := range s.parts {
			out = append(out, p...)
		}
	}
	return out, nil
}

// shape is what Module needs to know of a module before rewriting it.
type shape struct {
	globals       uint32   // imported and defined: the index of the next one
	typeParams    []uint32 // how many parameters each function type has
	importedFuncs uint32
	// indirectImports: an imported function is named outside code (in an
	// element segment, a constant expression or an export), so a table
	// may hold it and call_indirect reach it.
	indirectImports bool
	funcTypes       []uint32 // the type index of each function defined
	tables          []byte   // the reference type of each table, imported first
	memory          bool     // imported or defined
	importedMemory  bool
	dataCount       bool // a data count section
	unsupported     string
}

// types and funcs are how many types and functions (imported and
// defined) the module has: the rewrite adds some after them, which code
// of the module must not name.
func (m *shape) types() uint32 { return uint32(len(m.typeParams)) }
func (m *shape) funcs() uint32 { return m.importedFuncs + uint32(len(m.funcTypes)) }

func (m *shape) readImports(r *wasmbin.Reader) error {
	for _, im := range wasmbin.Imports(r) {
		switch im.Kind {
		case wasmbin.KindFunc:
			if im.Type >= m.types() {
				return errIndex("type", im.Type)
			}
			m.importedFuncs++
		case wasmbin.KindTable:
			m.tables = append(m.tables, im.Ref)
		case wasmbin.KindMemory:
			m.memory, m.importedMemory = true, true
		case wasmbin.KindGlobal:
			m.globals++
		}
	}
	return nil
}

// readTypes reads how many parameters each function type has.
func (m *shape) readTypes(r *wasmbin.Reader) error {
	n := r.U32()
	if uint64(n) > uint64(len(r.B)) {
		return fmt.Errorf("%w: %d types in %d bytes", wasmbin.ErrMalformed, n, len(r.B))
	}
	for i := uint32(0); i < n && r.Err == nil; i++ {
		if form := r.Byte(); form != 0x60 && r.Err == nil {
			m.unsupported = fmt.Sprintf("type %d of form %#x", i, form)
			return nil
		}
		params := r.U32()
		r.Skip(int(min(params, uint32(len(r.B)+1))))
		r.Skip(int(min(r.U32(), uint32(len(r.B)+1))))
		m.typeParams = append(m.typeParams, params)
	}
	return nil
}

// readFunctions reads the type of each function the module defines.
func (m *shape) readFunctions(r *wasmbin.Reader) {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil && r.Off < len(r.B); i++ {
		m.funcTypes = append(m.funcTypes, r.U32())
	}
}

// readTables reads the reference type of each table the module defines.
func (m *shape) readTables(r *wasmbin.Reader) {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil && r.Off < len(r.B); i++ {
		m.tables = append(m.tables, r.Byte())
		r.Limits()
	}
}

func (m *shape) readExports(r *wasmbin.Reader) error {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil; i++ {
		if name := r.Name(); name == InterruptExport || name == DepthExport {
			m.unsupported = "it exports " + name + " itself"
			return nil
		}
		kind, index := r.Byte(), r.U32()
		if kind == wasmbin.KindGlobal && index >= m.globals && r.Err == nil {
			return errGlobal(index)
		}
		if kind == wasmbin.KindFunc && index >= m.funcs() && r.Err == nil {
			return errIndex("function", index)
		}
		m.nameFunc(kind, index)
	}
	return nil
}

// nameFunc notes a function named outside code, which a table may then
// hold.
func (m *shape) nameFunc(kind byte, f uint32) {
	if kind == wasmbin.KindFunc && f < m.importedFuncs {
		m.indirectImports = true
	}
}

// readGlobals counts the module's own globals, and checks that their
// initial values refer only to globals before them.
func (m *shape) readGlobals(r *wasmbin.Reader) error {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil; i++ {
		r.Byte() // value type
		r.Byte() // mutability
		if err := m.constExpr(r); err != nil {
			return err
		}
		m.globals++
	}
	return nil
}

// readWhole are the sections Module reads to their end.
var readWhole = map[byte]bool{wasmbin.SectionType: true, wasmbin.SectionImport: true,
	wasmbin.SectionFunction: true, wasmbin.SectionTable: true, wasmbin.SectionGlobal: true,
	wasmbin.SectionExport: true, wasmbin.SectionElement: true, wasmbin.SectionData: true}

// readElements checks the offsets, functions and initial values of
// element segments.
func (m *shape) readElements(r *wasmbin.Reader) error {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil; i++ {
		flags := r.U32()
		if flags > 7 {
			return fmt.Errorf("%w: element segment flags %d", wasmbin.ErrMalformed, flags)
		}
		if flags&1 == 0 { // active: a table (with bit 2) and an offset
			if flags&2 != 0 {
				r.U32()
			}
			if err := m.constExpr(r); err != nil {
				return err
			}
		}
		if flags&3 != 0 {
			r.Byte() // element kind or reference type
		}
		count := r.U32()
		for j := uint32(0); j < count && r.Err == nil; j++ {
			if flags&4 == 0 {
				f := r.U32()
				if f >= m.funcs() && r.Err == nil {
					return errIndex("function", f)
				}
				m.nameFunc(wasmbin.KindFunc, f)
			} else if err := m.constExpr(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// readData checks the offsets of data segments.
func (m *shape) readData(r *wasmbin.Reader) error {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil; i++ {
		switch flags := r.U32(); flags {
		case 0, 2: // active, in memory 0 or a given one
			if flags == 2 {
				r.U32()
			}
			if err := m.constExpr(r); err != nil {
				return err
			}
		case 1: // passive
		default:
			return fmt.Errorf("%w: data segment flags %d", wasmbin.ErrMalformed, flags)
		}
		r.Skip(int(min(r.U32(), uint32(len(r.B)+1))))
	}
	return nil
}

// order is the position the binary format requires of each known section.
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// ensure adds an empty section id where the format puts it, unless secs
// has one.
func ensure(secs []wasmbin.Section, id byte) []wasmbin.Section {
	at := len(secs)
	for i, s := range secs {
		if s.ID == id {
			return secs
		}
		if s.ID != wasmbin.SectionCustom && order[s.ID] > order[id] && at == len(secs) {
			at = i
		}
	}
	empty := wasmbin.Section{ID: id, Body: []byte{0}}
	return append(secs[:at:at], append([]wasmbin.Section{empty}, secs[at:]...)...)
}

// appendVec returns a vector section body with n more entries, appended by
// add after the existing ones.
func appendVec(body []byte, n uint32, add func([]byte) []byte) []byte {
	r := &wasmbin.Reader{B: body}
	count := r.U32()
	out := wasmbin.AppendU32(nil, count+n)
	out = append(out, body[r.Off:]...)
	return add(out)
}

// checker makes the check rewriteCode inserts, which charges the budget
// for the code run since the previous check:
//
//	global.get $counter  i32.const charge  i32.sub  global.set $counter
//	global.get $counter  i32.const 0  i32.lt_s
//	if
//	  i32.const 0  memory.grow 0  drop      ;; a visit to the host
//	  i32.const Budget  global.set $counter
//	  global.get $flag  if  unreachable  end
//	end
//
// The charge is always five bytes long, so that a loop's can be written
// once its body has been read (see rewriteFunc).
type checker struct {
	counter, flag, depth uint32
	// loop: each check holds an empty loop, for the interpreter
	// (ForInterpreter).
	loop bool
}

// emptyLoop is loop end, where wazero's interpreter checks whether the
// call's context ended.
var emptyLoop = []byte{0x03, 0x40, 0x0b}

// chargeAt is where the charge starts in a check.
func (c checker) chargeAt() int { return len(wasmbin.AppendU32([]byte{0x23}, c.counter)) + 1 }

func (c checker) code(charge uint32) []byte {
	var w asm
	if c.loop {
		// The interpreter checks at the header of every loop, this
		// one's included, and its flag stays clear.
		return w.raw(emptyLoop).b
	}
	w.global(0x23, c.counter).op(0x41)
	w.b = appendCharge(w.b, charge)
	w.op(0x6b).global(0x24, c.counter).global(0x23, c.counter).op(0x41, 0x00, 0x48, 0x04, 0x40)
	w.op(0x41, 0x00, 0x40, 0x00, 0x1a).i32(Budget).global(0x24, c.counter)
	if c.loop {
		w.raw(emptyLoop)
	}
	w.global(0x23, c.flag).op(0x04, 0x40, 0x00, 0x0b)
	return w.op(0x0b).b
}

// flagCheck is the code after a call that may reach a function of the
// host's (a call of an import, call_indirect): it traps if the flag is
// set. Such a function runs in Go, where the Go scheduler can stop it,
// but for as long as its work takes (filling 32 MiB with random bytes
// takes 90 ms, clearing them 3 ms), which a charge cannot know; without
// it, a loop of them ran Budget / callUnits of them between two visits.
//
//	global.get $flag  if  unreachable  end
func (c checker) flagCheck() []byte {
	var w asm
	if c.loop {
		// The interpreter's flag stays clear.
		return w.raw(emptyLoop).b
	}
	return w.global(0x23, c.flag).op(0x04, 0x40, 0x00, 0x0b).b
}

// enter is the code that opens a function of FrameUnits units: it adds
// them to the depth, and traps past MaxDepth.
func (c checker) enter(units int32) []byte {
	var w asm
	w.global(0x23, c.depth).i32(units).op(0x6a).global(0x24, c.depth)
	return w.global(0x23, c.depth).i32(MaxDepth).op(0x4b, 0x04, 0x40, 0x00, 0x0b).b
}

// save and restore keep the depth in a local around a call: the callee
// adds its own frame, and the depth is the caller's again once it returns.
func (c checker) save(local uint32) []byte {
	var w asm
	return w.global(0x23, c.depth).set(local).b
}

func (c checker) restore(local uint32) []byte {
	var w asm
	w.get(local).global(0x24, c.depth)
	if c.loop {
		// The interpreter runs a frame's way out many times slower than
		// the compiler's code: unwinding the deepest recursion through
		// returns without a check took 100-200 ms.
		w.raw(emptyLoop)
	}
	return w.b
}

// maxCharge bounds a charge, so that the counter cannot wrap.
const maxCharge = 1 << 30

// appendCharge appends charge as a signed LEB128 number of five bytes.
func appendCharge(b []byte, charge uint32) []byte {
	charge = min(charge, maxCharge)
	for range 4 {
		b = append(b, byte(charge&0x7f)|0x80)
		charge >>= 7
	}
	return append(b, byte(charge))
}
