package wasmrt

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/tetratelabs/wazero"
)

// wazero v1.9.0 reads a module's machine code from its cache into an
// anonymous executable mapping of its own, all of it resident for as long
// as the module lives, although an instance runs a fraction of it: 10.9 MiB
// of every loaded build of the in-memory plugin, 17 MiB of the sqlite
// plugin's. So the host keeps a copy of the code, page-aligned, in a file
// of the cache ("text", codemap_linux.go), and replaces wazero's anonymous
// pages with a private mapping of that file, at the same address, with the
// same bytes: the pages are then clean and file-backed, resident only once
// a call runs them, shared with every other process that loads the build,
// and reclaimable by the kernel (RATIONALE: "Why does a loaded build cost
// what it does?").
//
// The code is found through wazero's unexported fields, as of the go.mod
// version v1.9.0: TestMapCodePinned names the version when an upgrade
// moves them. A layout this does not know leaves the code as it is.

// share moves what each build, and each instance, of comp would keep a
// copy of into files of the cache, mapped: its machine code (mapCode) and
// its data segments (memoryImage). It runs before comp's first instance.
func (c *Cache) share(comp *compiled) {
	comp.text = c.mapCode(comp.module)
	c.memoryImage(comp)
}

// moduleID returns the id wazero gave m (a sha256 of its bytes and of
// how it was compiled), false for a wazero whose internals differ.
func moduleID(m wazero.CompiledModule) (id [32]byte, ok bool) {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return id, false
	}
	mod := v.Elem().FieldByName("module")
	if !mod.IsValid() || mod.Kind() != reflect.Pointer || mod.IsNil() || mod.Elem().Kind() != reflect.Struct {
		return id, false
	}
	f := mod.Elem().FieldByName("ID")
	if !f.IsValid() || f.Type() != reflect.TypeFor[[32]byte]() {
		return id, false
	}
	return *(*[32]byte)(unsafe.Pointer(f.UnsafeAddr())), true
}

// executableOf returns the machine code wazero's compiler made of m, nil
// for an interpreter's module or a wazero whose internals differ. The
// slice aliases wazero's mapping: it is valid while m is open. owner is
// the address of wazero's structure that owns the mapping.
func executableOf(m wazero.CompiledModule) (code []byte, owner uintptr) {
	id, ok := moduleID(m)
	v := reflect.ValueOf(m)
	if !ok {
		return nil, 0
	}
	eng := v.Elem().FieldByName("compiledEngine")
	if !eng.IsValid() || eng.Kind() != reflect.Interface || eng.IsNil() {
		return nil, 0
	}
	eng = eng.Elem()
	if eng.Kind() != reflect.Pointer || eng.IsNil() || eng.Elem().Kind() != reflect.Struct {
		return nil, 0
	}
	mods, mux := eng.Elem().FieldByName("compiledModules"), eng.Elem().FieldByName("mux")
	if !mods.IsValid() || mods.Kind() != reflect.Map || mods.Type().Key() != reflect.TypeFor[[32]byte]() ||
		!mux.IsValid() || mux.Type() != reflect.TypeFor[sync.RWMutex]() {
		return nil, 0
	}
	// The engine's map of compiled modules is shared by every runtime on
	// the same compilation cache: read it under the engine's lock.
	lock := (*sync.RWMutex)(unsafe.Pointer(mux.UnsafeAddr()))
	lock.RLock()
	cm := mods.MapIndex(reflect.ValueOf(id))
	lock.RUnlock()
	if !cm.IsValid() || cm.Kind() != reflect.Pointer || cm.IsNil() || cm.Elem().Kind() != reflect.Struct {
		return nil, 0
	}
	ex := cm.Elem().FieldByName("executables")
	if !ex.IsValid() || ex.Kind() != reflect.Pointer || ex.IsNil() || ex.Elem().Kind() != reflect.Struct {
		return nil, 0
	}
	text := ex.Elem().FieldByName("executable")
	if !text.IsValid() || text.Kind() != reflect.Slice || text.Type().Elem().Kind() != reflect.Uint8 || text.Len() == 0 {
		return nil, 0
	}
	return unsafe.Slice((*byte)(text.UnsafePointer()), text.Len()), ex.Pointer()
}
