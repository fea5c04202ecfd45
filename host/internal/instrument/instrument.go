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

// Version changes whenever the rewrite does, so that rewritten modules kept
// by an earlier version are not used.
const Version = 8

// Budget is how many checks run between two visits to the host.
const Budget = 1 << 10

// ErrUnsupported: the module uses an encoding this package does not
// rewrite (SIMD, threads, exceptions, typed references), has no memory or
// a start function, or already exports InterruptExport. The host then runs it unrewritten, with
// the runtime's own preemption.
var ErrUnsupported = errors.New("instrument: module not supported")

// Module returns a copy of wasm with the checks added. It fails with
// ErrUnsupported, or wasmbin.ErrMalformed for a binary that does not
// decode; wasm itself is not changed.
func Module(wasm []byte) ([]byte, error) {
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, err
	}
	var m shape
	rank := 0
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
		case wasmbin.SectionImport:
			m.readImports(r)
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
	counter, flag := m.globals, m.globals+1
	check := checkCode(counter, flag)

	secs = ensure(secs, wasmbin.SectionGlobal)
	secs = ensure(secs, wasmbin.SectionExport)
	out := append(make([]byte, 0, len(wasm)+len(wasm)/8), wasmbin.Header...)
	for _, s := range secs {
		body := s.Body
		switch s.ID {
		case wasmbin.SectionCustom:
			// Debug information addresses code by offset, which the
			// checks shift; the runtime would report wrong lines.
			if name := (&wasmbin.Reader{B: body}).Name(); len(name) > 7 && name[:7] == ".debug_" {
				continue
			}
		case wasmbin.SectionGlobal:
			body = appendVec(body, 2, func(b []byte) []byte {
				// The counter starts with a full budget; the flag clear.
				b = append(b, 0x7f, 0x01, 0x41)
				b = wasmbin.AppendS32(b, Budget)
				b = append(b, 0x0b)
				return append(b, 0x7f, 0x01, 0x41, 0x00, 0x0b)
			})
		case wasmbin.SectionExport:
			body = appendVec(body, 1, func(b []byte) []byte {
				b = wasmbin.AppendName(b, InterruptExport)
				b = append(b, 0x03)
				return wasmbin.AppendU32(b, flag)
			})
		case wasmbin.SectionCode:
			body, err = rewriteCode(body, check, m.globals)
			if err != nil {
				return nil, err
			}
		case wasmbin.SectionData:
			if !m.importedMemory && !m.dataCount {
				body = coalesceData(body)
			}
		case wasmbin.SectionTable:
			if body, err = boundTables(body); err != nil {
				return nil, err
			}
		}
		out = append(out, s.ID)
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, nil
}

// shape is what Module needs to know of a module before rewriting it.
type shape struct {
	globals        uint32 // imported and defined: the index of the next one
	memory         bool   // imported or defined
	importedMemory bool
	dataCount      bool // a data count section
	unsupported    string
}

func (m *shape) readImports(r *wasmbin.Reader) {
	for _, im := range wasmbin.Imports(r) {
		switch im.Kind {
		case wasmbin.KindMemory:
			m.memory, m.importedMemory = true, true
		case wasmbin.KindGlobal:
			m.globals++
		}
	}
}

func (m *shape) readExports(r *wasmbin.Reader) error {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil; i++ {
		if r.Name() == InterruptExport {
			m.unsupported = "it exports " + InterruptExport + " itself"
			return nil
		}
		kind, index := r.Byte(), r.U32()
		if kind == wasmbin.KindGlobal && index >= m.globals && r.Err == nil {
			return errGlobal(index)
		}
	}
	return nil
}

// readGlobals counts the module's own globals, and checks that their
// initial values refer only to globals before them.
func (m *shape) readGlobals(r *wasmbin.Reader) error {
	n := r.U32()
	for i := uint32(0); i < n && r.Err == nil; i++ {
		r.Byte() // value type
		r.Byte() // mutability
		if err := constExpr(r, m.globals); err != nil {
			return err
		}
		m.globals++
	}
	return nil
}

// readWhole are the sections Module reads to their end.
var readWhole = map[byte]bool{wasmbin.SectionImport: true, wasmbin.SectionGlobal: true,
	wasmbin.SectionExport: true, wasmbin.SectionElement: true, wasmbin.SectionData: true}

// readElements checks the offsets and initial values of element segments.
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
			if err := constExpr(r, m.globals); err != nil {
				return err
			}
		}
		if flags&3 != 0 {
			r.Byte() // element kind or reference type
		}
		count := r.U32()
		for j := uint32(0); j < count && r.Err == nil; j++ {
			if flags&4 == 0 {
				r.U32() // a function index
			} else if err := constExpr(r, m.globals); err != nil {
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
			if err := constExpr(r, m.globals); err != nil {
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

// checkCode is the check rewriteCode inserts:
//
//	global.get $counter  i32.const 1  i32.sub  global.set $counter
//	global.get $counter  i32.eqz
//	if
//	  i32.const 0  memory.grow 0  drop      ;; a visit to the host
//	  i32.const Budget  global.set $counter
//	  global.get $flag  if  unreachable  end
//	end
func checkCode(counter, flag uint32) []byte {
	get := func(b []byte, g uint32) []byte { return wasmbin.AppendU32(append(b, 0x23), g) }
	set := func(b []byte, g uint32) []byte { return wasmbin.AppendU32(append(b, 0x24), g) }
	var b []byte
	b = get(b, counter)
	b = append(b, 0x41, 0x01, 0x6b)
	b = set(b, counter)
	b = get(b, counter)
	b = append(b, 0x45, 0x04, 0x40)
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a)
	b = append(b, 0x41)
	b = wasmbin.AppendS32(b, Budget)
	b = set(b, counter)
	b = get(b, flag)
	b = append(b, 0x04, 0x40, 0x00, 0x0b)
	return append(b, 0x0b)
}
