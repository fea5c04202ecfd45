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
	comp.text = c.mapCode(comp.module, comp.entry)
	c.memoryImage(comp)
}

// entryCode is what one load from the skeleton did with the machine code
// of the cache entry it served wazero (codemapread_linux.go): where wazero
// put the code, and whether it was mapped from a text file then, or read
// (and so which record mapCode may write once it compared the code with
// its text file). It belongs to that load's compiled module and to no
// other: an address alone says nothing of what is mapped there now, since
// wazero frees code and maps other code at the same address.
type entryCode struct {
	at     uintptr
	n      int
	mapped bool
	// record, sum and clock: the record to write for code that was read,
	// the CRC-32C the entry stores, and the file system's clock when the
	// read started.
	record string
	sum    uint32
	clock  int64
}

// of reports whether code is the code this load read or mapped.
func (e *entryCode) of(code []byte) bool {
	return e != nil && len(code) > 0 && e.n == len(code) && e.at == uintptr(unsafe.Pointer(&code[0]))
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
// wazero's structure that owns the mapping (and unmaps it when collected).
func executableOf(m wazero.CompiledModule) (code []byte, owner unsafe.Pointer) {
	id, ok := moduleID(m)
	v := reflect.ValueOf(m)
	if !ok {
		return nil, nil
	}
	eng := v.Elem().FieldByName("compiledEngine")
	if !eng.IsValid() || eng.Kind() != reflect.Interface || eng.IsNil() {
		return nil, nil
	}
	eng = eng.Elem()
	if eng.Kind() != reflect.Pointer || eng.IsNil() || eng.Elem().Kind() != reflect.Struct {
		return nil, nil
	}
	mods, mux := eng.Elem().FieldByName("compiledModules"), eng.Elem().FieldByName("mux")
	if !mods.IsValid() || mods.Kind() != reflect.Map || mods.Type().Key() != reflect.TypeFor[[32]byte]() ||
		!mux.IsValid() || mux.Type() != reflect.TypeFor[sync.RWMutex]() {
		return nil, nil
	}
	// The engine's map of compiled modules is shared by every runtime on
	// the same compilation cache: read it under the engine's lock.
	lock := (*sync.RWMutex)(unsafe.Pointer(mux.UnsafeAddr()))
	lock.RLock()
	cm := mods.MapIndex(reflect.ValueOf(id))
	lock.RUnlock()
	if !cm.IsValid() || cm.Kind() != reflect.Pointer || cm.IsNil() || cm.Elem().Kind() != reflect.Struct {
		return nil, nil
	}
	ex := cm.Elem().FieldByName("executables")
	if !ex.IsValid() || ex.Kind() != reflect.Pointer || ex.IsNil() || ex.Elem().Kind() != reflect.Struct {
		return nil, nil
	}
	text := ex.Elem().FieldByName("executable")
	if !text.IsValid() || text.Kind() != reflect.Slice || text.Type().Elem().Kind() != reflect.Uint8 || text.Len() == 0 {
		return nil, nil
	}
	return unsafe.Slice((*byte)(text.UnsafePointer()), text.Len()), ex.UnsafePointer()
}
