// Package loader checks a plugin before any of its code runs: the sha256
// pin, the WebAssembly export and import sections against ABI v1, and then
// the PluginInfo its describe export returns.
package loader

import (
	"bytes"
	"errors"
	"fmt"
)

// Header of every WebAssembly binary: magic and version 1.
var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

const (
	sectionImport = 2
	sectionExport = 7

	kindFunc = 0x00
)

// Import is something a module imports: a function, or (Kind not "func")
// a table, memory or global, which no plugin may import.
type Import struct {
	Module, Name string
	Kind         string
}

// Sections is what the host reads of a module before compiling it.
type Sections struct {
	// Exports are the names of exported functions.
	Exports []string
	// Imports are everything the module imports.
	Imports []Import
}

// errMalformed wraps every decoding failure.
var errMalformed = errors.New("malformed WebAssembly binary")

// ReadSections decodes the import and export sections of a WebAssembly
// binary, skipping every other section (the code section of a Go plugin is
// megabytes; a full decode would cost more than a warm-cache compile).
func ReadSections(b []byte) (*Sections, error) {
	if !bytes.HasPrefix(b, wasmHeader) {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 module", errMalformed)
	}
	r := &reader{b: b, off: len(wasmHeader)}
	var s Sections
	for r.off < len(r.b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			break
		}
		if uint64(size) > uint64(len(r.b)-r.off) {
			return nil, fmt.Errorf("%w: section %d overruns the binary", errMalformed, id)
		}
		sec := &reader{b: r.b[r.off : r.off+int(size)]}
		r.off += int(size)
		switch id {
		case sectionImport:
			s.Imports = readImports(sec)
		case sectionExport:
			s.Exports = readExports(sec)
		}
		if sec.err != nil {
			return nil, fmt.Errorf("%w: section %d: %v", errMalformed, id, sec.err)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, r.err)
	}
	return &s, nil
}

func readExports(r *reader) []string {
	n := r.u32()
	var out []string
	for i := uint32(0); i < n && r.err == nil; i++ {
		name := r.name()
		kind := r.byte()
		r.u32() // index
		if r.err == nil && kind == kindFunc {
			out = append(out, name)
		}
	}
	return out
}

func readImports(r *reader) []Import {
	n := r.u32()
	var out []Import
	for i := uint32(0); i < n && r.err == nil; i++ {
		mod := r.name()
		name := r.name()
		switch kind := r.byte(); kind {
		case 0x00: // func: type index
			r.u32()
			if r.err == nil {
				out = append(out, Import{Module: mod, Name: name, Kind: "func"})
			}
		case 0x01: // table: reftype, limits
			r.byte()
			r.limits()
			out = append(out, Import{Module: mod, Name: name, Kind: "table"})
		case 0x02: // memory: limits
			r.limits()
			out = append(out, Import{Module: mod, Name: name, Kind: "memory"})
		case 0x03: // global: valtype, mutability
			r.byte()
			r.byte()
			out = append(out, Import{Module: mod, Name: name, Kind: "global"})
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unknown import kind %#x", kind)
			}
		}
	}
	return out
}

// reader decodes the few WebAssembly encodings the sections above use. The
// first error sticks; later reads return zero values.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.err = errors.New("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// u32 reads an unsigned LEB128 number of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			if shift == 28 && c > 0x0f {
				r.err = errors.New("LEB128 overflows 32 bits")
				return 0
			}
			return v
		}
	}
	r.err = errors.New("LEB128 too long")
	return 0
}

func (r *reader) name() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.err = errors.New("name overruns its section")
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}

func (r *reader) limits() {
	switch flag := r.byte(); flag {
	case 0x00:
		r.u32()
	case 0x01, 0x03: // max present (0x03: shared)
		r.u32()
		r.u32()
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown limits flag %#x", flag)
		}
	}
}
