package loader

import (
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// Bounds on the locals a module declares. The runtime writes a byte for
// every local of every function as it decodes the module, before anything
// checks how many there are.
const (
	// MaxFunctionLocals is the most locals one function may declare: the
	// limit web browsers apply (the WebAssembly JavaScript interface's
	// implementation limits), so no portable module is refused for it.
	MaxFunctionLocals = 50_000
	// MaxLocalsPerCodeByte bounds the locals of all functions together by
	// the size of the code section (at least MaxFunctionLocals). Go,
	// AssemblyScript and Rust plugins declare well under one per byte.
	MaxLocalsPerCodeByte = 4
)

// errBounds marks a count or size that exceeds what holds it.
var errBounds = errors.New("declares more than its bytes hold")

// checkBounds refuses a module in which a count or a size exceeds the bytes
// of the section that must hold what it counts, or that declares more locals
// than MaxFunctionLocals and MaxLocalsPerCodeByte allow.
//
// The runtime allocates room for everything a count announces before it
// reads the first entry: a 15-byte module whose type section announces four
// billion types made it ask for hundreds of gigabytes, and a Go program
// cannot survive a failed allocation (the process dies with "out of
// memory"). Every entry takes at least one byte, so a count no larger than
// its section's remaining bytes bounds each such allocation by the size of
// the module. This walks every structure the runtime decodes with a count or
// a size, as the runtime does, and leaves the rest of validation to it.
func checkBounds(secs []wasmbin.Section) error {
	for _, s := range secs {
		b := &bounds{r: wasmbin.Reader{B: s.Body}}
		switch s.ID {
		case wasmbin.SectionCustom:
			if b.r.Name() == "name" {
				b.names()
			}
		case wasmbin.SectionType:
			b.vec(b.funcType)
		case wasmbin.SectionImport:
			b.vec(b.importEntry)
		case wasmbin.SectionFunction, wasmbin.SectionTable, wasmbin.SectionMemory, wasmbin.SectionGlobal:
			// Entries without counts of their own, which the runtime
			// decodes one after the other until the section ends.
			b.count()
		case wasmbin.SectionExport:
			b.vec(func() { b.bytes(); b.r.Byte(); b.r.U32() }) // name, kind, index
		case wasmbin.SectionElement:
			b.vec(b.element)
		case wasmbin.SectionCode:
			b.code(len(s.Body))
		case wasmbin.SectionData:
			b.vec(b.data)
		}
		if errors.Is(b.err, ErrTooManyLocals) {
			return fmt.Errorf("section %d: %w: split the function", s.ID, b.err)
		}
		if b.err != nil {
			return fmt.Errorf("%w: section %d: %w: the file is damaged, or was not written by a WebAssembly toolchain", wasmbin.ErrMalformed, s.ID, b.err)
		}
		if b.r.Err != nil {
			return fmt.Errorf("%w: section %d: %v", wasmbin.ErrMalformed, s.ID, b.r.Err)
		}
	}
	return nil
}

// bounds walks one section. The first failure sticks: err for a bound
// exceeded, r.Err for bytes that do not decode.
type bounds struct {
	r   wasmbin.Reader
	err error
}

func (b *bounds) failed() bool { return b.err != nil || b.r.Err != nil }

// count reads a count or size and checks it against the bytes left.
func (b *bounds) count() uint32 {
	at := b.r.Off
	n := b.r.U32()
	if !b.failed() && uint64(n) > uint64(len(b.r.B)-b.r.Off) {
		b.err = fmt.Errorf("%w: a count or size of %d at byte %d, with %d bytes after it", errBounds, n, at, len(b.r.B)-b.r.Off)
	}
	if b.failed() {
		return 0
	}
	return n
}

// vec reads a count, then that many entries with entry.
func (b *bounds) vec(entry func()) {
	n := b.count()
	for i := uint32(0); i < n && !b.failed(); i++ {
		entry()
	}
}

// bytes reads a size and skips that many bytes: a name, or a vector of
// value types or of data.
func (b *bounds) bytes() { b.r.Skip(int(b.count())) }

func (b *bounds) funcType() {
	if b.r.Byte() != 0x60 {
		b.r.Failf("a type that is not a function type")
		return
	}
	b.bytes() // parameter types, a byte each
	b.bytes() // result types
}

func (b *bounds) importEntry() {
	b.bytes() // module
	b.bytes() // name
	switch kind := b.r.Byte(); kind {
	case wasmbin.KindFunc:
		b.r.U32()
	case wasmbin.KindTable:
		b.r.Byte()
		b.r.Limits()
	case wasmbin.KindMemory:
		b.r.Limits()
	case wasmbin.KindGlobal:
		b.r.Byte()
		b.r.Byte()
	default:
		b.r.Failf("unknown import kind %#x", kind)
	}
}

// constExpr skips a constant expression: one instruction and end, the forms
// the runtime accepts.
func (b *bounds) constExpr() {
	switch op := b.r.Byte(); op {
	case 0x41: // i32.const
		b.r.SkipLEB(5)
	case 0x42: // i64.const
		b.r.SkipLEB(10)
	case 0x43: // f32.const
		b.r.Skip(4)
	case 0x44: // f64.const
		b.r.Skip(8)
	case 0x23, 0xd2: // global.get, ref.func
		b.r.U32()
	case 0xd0: // ref.null
		b.r.Byte()
	case 0xfd: // v128.const
		b.r.U32()
		b.r.Skip(16)
	default:
		b.r.Failf("constant expression with opcode %#x", op)
	}
	if b.r.Byte() != 0x0b {
		b.r.Failf("constant expression without end")
	}
}

// element skips an element segment, in any of its eight forms.
func (b *bounds) element() {
	flags := b.r.U32()
	if flags > 7 {
		b.r.Failf("element segment flags %d", flags)
		return
	}
	if flags&1 == 0 { // active: a table (with bit 2) and an offset
		if flags&2 != 0 {
			b.r.U32()
		}
		b.constExpr()
	}
	if flags&3 != 0 {
		b.r.Byte() // element kind or reference type
	}
	if flags&4 == 0 {
		b.vec(func() { b.r.U32() }) // function indexes
	} else {
		b.vec(b.constExpr)
	}
}

func (b *bounds) data() {
	switch flags := b.r.U32(); flags {
	case 0, 2: // active, in memory 0 or a given one
		if flags == 2 {
			b.r.U32()
		}
		b.constExpr()
	case 1: // passive
	default:
		b.r.Failf("data segment flags %d", flags)
		return
	}
	b.bytes()
}

// code checks each function's size and locals; size is the section's.
func (b *bounds) code(size int) {
	total, limit := 0, max(MaxFunctionLocals, MaxLocalsPerCodeByte*size)
	n := b.count()
	for i := uint32(0); i < n && !b.failed(); i++ {
		body := b.count()
		if b.failed() {
			return
		}
		f := bounds{r: wasmbin.Reader{B: b.r.B[b.r.Off : b.r.Off+int(body)]}}
		b.r.Off += int(body)
		locals := 0
		f.vec(func() {
			locals += int(f.r.U32())
			f.r.Byte()
		})
		if f.failed() {
			b.r.Err, b.err = f.r.Err, f.err
			if b.r.Err != nil {
				b.r.Err = fmt.Errorf("function %d: %w", i, b.r.Err)
			} else {
				b.err = fmt.Errorf("function %d: %w", i, b.err)
			}
			return
		}
		total += locals
		switch {
		case locals > MaxFunctionLocals:
			b.err = fmt.Errorf("%w: function %d declares %d locals, more than the %d a function may have", ErrTooManyLocals, i, locals, MaxFunctionLocals)
		case total > limit:
			b.err = fmt.Errorf("%w: the functions declare more than %d locals, %d per byte of code", ErrTooManyLocals, limit, MaxLocalsPerCodeByte)
		}
	}
}

// ErrTooManyLocals: the module declares more locals than the host accepts
// (MaxFunctionLocals, MaxLocalsPerCodeByte).
// It wraps hosterr.ErrCompileLimit.
var ErrTooManyLocals = fmt.Errorf("%w: too many locals", hosterr.ErrCompileLimit)

// names checks the subsections of a name section that the runtime decodes:
// the module name, function names and local names. The runtime decodes
// these by their content, not their declared size, and goes on while the
// declared sizes add up to less than the section: a size smaller than its
// content would have it read on into the next section, which this walk
// does not see. So each of these must take exactly the bytes it declares.
func (b *bounds) names() {
	for !b.failed() && b.r.Off < len(b.r.B) {
		id := b.r.Byte()
		size := b.r.U32()
		start := b.r.Off
		switch id {
		case 0:
			b.bytes()
		case 1:
			b.vec(func() { b.r.U32(); b.bytes() })
		case 2:
			b.vec(func() {
				b.r.U32()
				b.vec(func() { b.r.U32(); b.bytes() })
			})
		default:
			b.r.Skip(int(min(size, uint32(len(b.r.B)+1))))
		}
		if !b.failed() && uint64(b.r.Off-start) != uint64(size) {
			b.err = fmt.Errorf("%w: name subsection %d declares %d bytes and holds %d", errBounds, id, size, b.r.Off-start)
		}
	}
}
