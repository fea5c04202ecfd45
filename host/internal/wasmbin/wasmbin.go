// Package wasmbin decodes the parts of the WebAssembly binary format that
// the host reads before it hands a module to the runtime: the section list
// and the encodings inside sections (LEB128 numbers, names, limits).
package wasmbin

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// Header starts every WebAssembly binary: magic and version 1.
var Header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// Section ids.
const (
	SectionCustom    = 0
	SectionType      = 1
	SectionImport    = 2
	SectionFunction  = 3
	SectionTable     = 4
	SectionMemory    = 5
	SectionGlobal    = 6
	SectionExport    = 7
	SectionStart     = 8
	SectionElement   = 9
	SectionCode      = 10
	SectionData      = 11
	SectionDataCount = 12 // how many data segments; needed by code that names them
)

// ErrMalformed wraps every decoding failure.
var ErrMalformed = errors.New("malformed WebAssembly binary")

// Section is one section of a module, its body not decoded.
type Section struct {
	ID   byte
	Body []byte
}

// Sections splits a module into its sections, in order.
func Sections(b []byte) ([]Section, error) {
	if !bytes.HasPrefix(b, Header) {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 module", ErrMalformed)
	}
	r := &Reader{B: b, Off: len(Header)}
	var out []Section
	for r.Off < len(r.B) {
		id := r.Byte()
		size := r.U32()
		if r.Err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, r.Err)
		}
		if uint64(size) > uint64(len(r.B)-r.Off) {
			return nil, fmt.Errorf("%w: section %d overruns the binary", ErrMalformed, id)
		}
		out = append(out, Section{ID: id, Body: r.B[r.Off : r.Off+int(size)]})
		r.Off += int(size)
	}
	return out, nil
}

// Reader decodes values from B starting at Off. The first error sticks in
// Err; later reads return zero values.
type Reader struct {
	B   []byte
	Off int
	Err error
}

// Failf records an error unless one is recorded already.
func (r *Reader) Failf(format string, args ...any) {
	if r.Err == nil {
		r.Err = fmt.Errorf(format, args...)
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err == nil && r.Off < len(r.B) {
		c := r.B[r.Off]
		r.Off++
		return c
	}
	return r.end()
}

// end records reading past the end, unless an error is recorded already,
// and returns 0; apart from Byte so that Byte is inlined.
func (r *Reader) end() byte {
	if r.Err == nil {
		r.Err = errEnd
	}
	return 0
}

var errEnd = errors.New("unexpected end")

// U32 reads an unsigned LEB128 number of at most 32 bits.
func (r *Reader) U32() uint32 {
	// Most numbers in code are one byte: read them without the loop.
	if r.Off < len(r.B) && r.B[r.Off] < 0x80 && r.Err == nil {
		c := r.B[r.Off]
		r.Off++
		return uint32(c)
	}
	return r.u32()
}

// u32 is U32 for a number of more than one byte, or at the end.
func (r *Reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.Byte()
		if r.Err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift == 28 && c > 0x0f {
				r.Failf("LEB128 overflows 32 bits")
				return 0
			}
			return v
		}
	}
	r.Failf("LEB128 too long")
	return 0
}

// S32 reads a signed LEB128 number of at most 32 bits.
func (r *Reader) S32() int32 {
	var v int64
	for shift := 0; shift < 35; {
		c := r.Byte()
		if r.Err != nil {
			return 0
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if c&0x40 != 0 {
				v |= -1 << shift
			}
			if v < math.MinInt32 || v > math.MaxInt32 {
				r.Failf("LEB128 overflows 32 bits")
				return 0
			}
			return int32(v)
		}
	}
	r.Failf("LEB128 too long")
	return 0
}

// SkipLEB skips a LEB128 number of at most max bytes (5 for 32 bits, 10
// for 64), signed or not.
func (r *Reader) SkipLEB(max int) {
	for range max {
		if r.Byte()&0x80 == 0 {
			return
		}
	}
	r.Failf("LEB128 too long")
}

// Skip skips n bytes.
func (r *Reader) Skip(n int) {
	if r.Err != nil {
		return
	}
	if n > len(r.B)-r.Off {
		r.Failf("unexpected end")
		return
	}
	r.Off += n
}

// Name reads a length-prefixed UTF-8 name.
func (r *Reader) Name() string {
	n := r.U32()
	if r.Err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.B)-r.Off) {
		r.Failf("name overruns its section")
		return ""
	}
	s := string(r.B[r.Off : r.Off+int(n)])
	r.Off += int(n)
	return s
}

// Limits skips the limits of a memory or table type.
func (r *Reader) Limits() {
	switch flag := r.Byte(); flag {
	case 0x00:
		r.U32()
	case 0x01, 0x03: // max present (0x03: shared)
		r.U32()
		r.U32()
	default:
		r.Failf("unknown limits flag %#x", flag)
	}
}

// AppendU32 appends v as unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendS32 appends v as signed LEB128.
func AppendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendName appends a length-prefixed name.
func AppendName(b []byte, s string) []byte {
	return append(AppendU32(b, uint32(len(s))), s...)
}

// Kinds of imports and exports.
const (
	KindFunc   = 0x00
	KindTable  = 0x01
	KindMemory = 0x02
	KindGlobal = 0x03
)

// Import is one entry of the import section.
type Import struct {
	Module, Name string
	Kind         byte
	Ref          byte   // a table's reference type
	Type         uint32 // a function's type index
}

// Imports decodes the body of an import section; an import of an unknown
// kind is an error.
func Imports(r *Reader) []Import {
	n := r.U32()
	var out []Import
	for i := uint32(0); i < n && r.Err == nil; i++ {
		im := Import{Module: r.Name(), Name: r.Name(), Kind: r.Byte()}
		switch im.Kind {
		case KindFunc: // type index
			im.Type = r.U32()
		case KindTable: // reference type, limits
			im.Ref = r.Byte()
			r.Limits()
		case KindMemory:
			r.Limits()
		case KindGlobal: // value type, mutability
			r.Byte()
			r.Byte()
		default:
			r.Failf("unknown import kind %#x", im.Kind)
		}
		if r.Err == nil {
			out = append(out, im)
		}
	}
	return out
}
