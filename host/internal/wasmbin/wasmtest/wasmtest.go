// Package wasmtest assembles small WebAssembly modules for tests, byte by
// byte, so that a test can hold exactly the instructions it is about.
package wasmtest

import "github.com/wasmhist/wasmhist/host/internal/wasmbin"

// Value types.
const (
	I32 = 0x7f
	I64 = 0x7e
)

// Func is one function of a module.
type Func struct {
	Params, Results []byte // value types
	Locals          []byte // one local per entry, of that type
	Code            []byte // instructions, without the final end
	Export          string // "" for none
}

// Module describes a module: its functions, each with a type of its own,
// and optionally one memory of one page, exported as "memory".
type Module struct {
	Funcs  []Func
	Memory bool
	// Table is the body of a table section, if not nil.
	Table []byte
	// Exports are exported after the functions and the memory.
	Exports []Export
	// Extra are sections appended as they are, in order (id, then body).
	Extra []Section
}

// Export is an export of any kind by index.
type Export struct {
	Name  string
	Kind  byte
	Index uint32
}

// Section is a raw section.
type Section struct {
	ID   byte
	Body []byte
}

// Bytes encodes the module.
func (m Module) Bytes() []byte {
	out := append([]byte(nil), wasmbin.Header...)
	n := uint32(len(m.Funcs))
	var types, funcs, exports, code []byte
	types, funcs, code = wasmbin.AppendU32(nil, n), wasmbin.AppendU32(nil, n), wasmbin.AppendU32(nil, n)
	var nexp uint32
	for i, f := range m.Funcs {
		types = append(types, 0x60)
		types = append(wasmbin.AppendU32(types, uint32(len(f.Params))), f.Params...)
		types = append(wasmbin.AppendU32(types, uint32(len(f.Results))), f.Results...)
		funcs = wasmbin.AppendU32(funcs, uint32(i))
		body := wasmbin.AppendU32(nil, uint32(len(f.Locals)))
		for _, t := range f.Locals {
			body = append(body, 1, t)
		}
		body = append(append(body, f.Code...), 0x0b)
		code = append(wasmbin.AppendU32(code, uint32(len(body))), body...)
		if f.Export != "" {
			nexp++
			exports = append(wasmbin.AppendName(exports, f.Export), 0x00)
			exports = wasmbin.AppendU32(exports, uint32(i))
		}
	}
	var memory []byte
	if m.Memory {
		memory = []byte{1, 0x00, 1}
		nexp++
		exports = append(wasmbin.AppendName(exports, "memory"), 0x02, 0)
	}
	for _, e := range m.Exports {
		nexp++
		exports = append(wasmbin.AppendName(exports, e.Name), e.Kind)
		exports = wasmbin.AppendU32(exports, e.Index)
	}
	out = section(out, 1, types)
	out = section(out, 3, funcs)
	if m.Table != nil {
		out = section(out, 4, m.Table)
	}
	if memory != nil {
		out = section(out, wasmbin.SectionMemory, memory)
	}
	out = section(out, wasmbin.SectionExport, append(wasmbin.AppendU32(nil, nexp), exports...))
	out = section(out, wasmbin.SectionCode, code)
	for _, s := range m.Extra {
		out = section(out, s.ID, s.Body)
	}
	return out
}

func section(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	return append(wasmbin.AppendU32(out, uint32(len(body))), body...)
}
