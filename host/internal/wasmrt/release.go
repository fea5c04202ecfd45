package wasmrt

import (
	"reflect"
	"unsafe"

	"github.com/tetratelabs/wazero"
)

// releaseCodeBodies drops the function bodies wazero keeps in a compiled
// module's decoded form after it has compiled them to machine code, and
// returns how many bytes of bodies it dropped (0 when it found nothing to
// drop: an interpreter build, or a wazero whose internals differ).
//
// wazero v1.9.0 keeps the module it decoded, every function's body
// included, for as long as the compiled module lives, and needs the bodies
// only to compile: instances run the machine code, and stack traces read
// the name section and the definitions built at compile time. For the
// in-memory plugin the bodies are about 2.1 MiB of every loaded build's
// 17 MiB (RATIONALE: "Why does a loaded build cost what it does?"). The
// field names are wazero's internals, reached with reflect and unsafe:
// TestReleaseCodeBodiesPinned names the version when an upgrade moves
// them.
func releaseCodeBodies(m wazero.CompiledModule) int {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	mod := v.Elem().FieldByName("module")
	if !mod.IsValid() || mod.Kind() != reflect.Pointer || mod.IsNil() || mod.Elem().Kind() != reflect.Struct {
		return 0
	}
	code := mod.Elem().FieldByName("CodeSection")
	if !code.IsValid() || code.Kind() != reflect.Slice || code.Type().Elem().Kind() != reflect.Struct {
		return 0
	}
	// The fields are looked up once, by the type: by name on each of the
	// thousands of functions of a Go plugin (in-memory: 1,855), the lookups
	// were 3.9 M instructions, 4% of a warm `chat -m`.
	elem := code.Type().Elem()
	goFunc, ok := elem.FieldByName("GoFunc")
	if !ok || goFunc.Type.Kind() != reflect.Interface {
		return 0
	}
	var bytes [][]int
	for _, name := range []string{"Body", "LocalTypes"} {
		f, ok := elem.FieldByName(name)
		if !ok || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.Uint8 {
			return 0
		}
		bytes = append(bytes, f.Index)
	}
	released := 0
	for i := range code.Len() {
		c := code.Index(i)
		if !c.FieldByIndex(goFunc.Index).IsNil() {
			// A host function.
			return released
		}
		for _, index := range bytes {
			f := c.FieldByIndex(index)
			released += f.Len()
			// f is read-only (reached through an unexported field) but
			// addressable: write it through its address.
			reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetZero()
		}
	}
	return released
}
