// Package loader checks a plugin before any of its code runs: the sha256
// pin, the WebAssembly export and import sections against ABI v1, and then
// the PluginInfo its describe export returns.
package loader

import (
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
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

// SectionsVersion names what ReadSections checks: a record of its result
// (wasmrt.Cache.KeepSections) is trusted only by a host of the same
// version. Raise it whenever ReadSections may refuse a module it accepted,
// or read one differently.
const SectionsVersion = 1

// ReadSections decodes the import and export sections of a WebAssembly
// binary, after checking that no count or size in it exceeds the bytes that
// must hold what it counts (see checkBounds). It decodes nothing else (the
// code section of a Go plugin is megabytes; a full decode would cost more
// than a warm-cache compile).
func ReadSections(b []byte) (*Sections, error) {
	secs, err := wasmbin.Sections(b)
	if err != nil {
		return nil, err
	}
	if err := checkBounds(secs); err != nil {
		return nil, err
	}
	var s Sections
	for _, sec := range secs {
		r := &wasmbin.Reader{B: sec.Body}
		switch sec.ID {
		case wasmbin.SectionImport:
			s.Imports = readImports(r)
		case wasmbin.SectionExport:
			s.Exports = readExports(r)
		}
		if r.Err != nil {
			return nil, fmt.Errorf("%w: section %d: %v", wasmbin.ErrMalformed, sec.ID, r.Err)
		}
	}
	return &s, nil
}

func readExports(r *wasmbin.Reader) []string {
	n := r.U32()
	var out []string
	for i := uint32(0); i < n && r.Err == nil; i++ {
		name := r.Name()
		kind := r.Byte()
		r.U32() // index
		if r.Err == nil && kind == wasmbin.KindFunc {
			out = append(out, name)
		}
	}
	return out
}

// importKinds names the kinds of wasmbin.Import.
var importKinds = map[byte]string{wasmbin.KindFunc: "func", wasmbin.KindTable: "table", wasmbin.KindMemory: "memory", wasmbin.KindGlobal: "global"}

func readImports(r *wasmbin.Reader) []Import {
	var out []Import
	for _, im := range wasmbin.Imports(r) {
		out = append(out, Import{Module: im.Module, Name: im.Name, Kind: importKinds[im.Kind]})
	}
	return out
}
