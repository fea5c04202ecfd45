package wasmrt

import (
	"reflect"
	"unsafe"

	"github.com/tetratelabs/wazero"
)

// A Go guest's data segments are its read-only data, its type
// descriptors and its function tables (the runtime's pclntab): 1.2 MiB of
// the in-memory plugin, 1.9 MiB of the sqlite plugin. wazero v1.9.0 keeps
// them on the heap for as long as the compiled module lives and copies
// them into every instance's linear memory, where each instance keeps its
// own copy, resident, although its guest writes few of those pages. So the
// host lays the active data segments out once, as the initial memory they
// make (the image), in a file of the cache (image_linux.go), and maps the
// file copy-on-write at the start of every instance's linear memory: the
// pages a guest never writes are the page cache's, shared by every
// instance of the build and by every process; and the module's copy of
// the segments is dropped, so that wazero copies nothing (RATIONALE: "Why
// does a loaded build cost what it does?").
//
// The segments are reached through wazero's unexported fields, as of the
// go.mod version v1.9.0: TestMemoryImagePinned names the version when an
// upgrade moves them. A module whose layout this does not know keeps its
// segments, which wazero copies as before.

// minImage is the least image worth a file: a module whose data segments
// end below it keeps them.
const minImage = 64 << 10

// opI32Const is the opcode of i32.const, the only offset expression of a
// data segment an image is made for.
const opI32Const = 0x41

// dataImage returns the initial linear memory m's active data segments
// make, up to the end of the last one, and drop, which removes the
// segments from m so that instantiating it copies nothing. ok is false,
// and m is left as it is, unless m defines its one memory (not imported)
// and every data segment is active, at an i32.const offset, and ends
// within the memory's initial size.
func dataImage(m wazero.CompiledModule) (img []byte, drop func(), ok bool) {
	_, build, drop, ok := dataLayout(m)
	if !ok {
		return nil, nil, false
	}
	return build(), drop, true
}

// dataLayout is dataImage without the image: its size, and build, which
// lays it out.
func dataLayout(m wazero.CompiledModule) (size int, build func() []byte, drop func(), ok bool) {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0, nil, nil, false
	}
	mod := v.Elem().FieldByName("module")
	if !mod.IsValid() || mod.Kind() != reflect.Pointer || mod.IsNil() || mod.Elem().Kind() != reflect.Struct {
		return 0, nil, nil, false
	}
	mod = mod.Elem()
	mem, imported, data := mod.FieldByName("MemorySection"), mod.FieldByName("ImportMemoryCount"), mod.FieldByName("DataSection")
	if !mem.IsValid() || mem.Kind() != reflect.Pointer || mem.IsNil() || mem.Elem().Kind() != reflect.Struct ||
		!imported.IsValid() || imported.Kind() != reflect.Uint32 || imported.Uint() != 0 ||
		!data.IsValid() || data.Kind() != reflect.Slice || data.Type().Elem().Kind() != reflect.Struct || data.Len() == 0 {
		return 0, nil, nil, false
	}
	minPages := mem.Elem().FieldByName("Min")
	if !minPages.IsValid() || minPages.Kind() != reflect.Uint32 {
		return 0, nil, nil, false
	}
	type segment struct {
		offset uint64
		init   []byte
		field  reflect.Value
	}
	segs := make([]segment, 0, data.Len())
	var end uint64
	for i := range data.Len() {
		d := data.Index(i)
		expr, init, passive := d.FieldByName("OffsetExpression"), d.FieldByName("Init"), d.FieldByName("Passive")
		if !expr.IsValid() || expr.Kind() != reflect.Struct || !init.IsValid() || init.Kind() != reflect.Slice ||
			init.Type().Elem().Kind() != reflect.Uint8 || !passive.IsValid() || passive.Kind() != reflect.Bool || passive.Bool() {
			return 0, nil, nil, false
		}
		op, arg := expr.FieldByName("Opcode"), expr.FieldByName("Data")
		if !op.IsValid() || op.Kind() != reflect.Uint8 || op.Uint() != opI32Const ||
			!arg.IsValid() || arg.Kind() != reflect.Slice || arg.Type().Elem().Kind() != reflect.Uint8 {
			return 0, nil, nil, false
		}
		off, ok := sleb32(unsafe.Slice((*byte)(arg.UnsafePointer()), arg.Len()))
		if !ok || off < 0 {
			return 0, nil, nil, false
		}
		b := unsafe.Slice((*byte)(init.UnsafePointer()), init.Len())
		segs = append(segs, segment{uint64(off), b, init})
		end = max(end, uint64(off)+uint64(len(b)))
	}
	if end > minPages.Uint()*PageSize {
		// Instantiating fails (the segment is out of bounds): as wazero
		// says it.
		return 0, nil, nil, false
	}
	build = func() []byte {
		img := make([]byte, end)
		for _, s := range segs {
			// Later segments overwrite earlier ones, as instantiation does.
			copy(img[s.offset:], s.init)
		}
		return img
	}
	drop = func() {
		for _, s := range segs {
			// The field is read-only (reached through an unexported
			// field) but addressable: write it through its address.
			reflect.NewAt(s.field.Type(), unsafe.Pointer(s.field.UnsafeAddr())).Elem().SetZero()
		}
	}
	return int(end), build, drop, true
}

// sleb32 reads a signed LEB128 of at most 32 bits, the whole of b.
func sleb32(b []byte) (int32, bool) {
	var v int64
	shift := 0
	for i, c := range b {
		if shift >= 35 {
			return 0, false
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if i != len(b)-1 {
				return 0, false
			}
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return int32(v), v >= -1<<31 && v < 1<<31
		}
	}
	return 0, false
}

// A Go guest's runtime, as it starts, writes zeros over memory that is
// already zero: on Wasm it takes memory with sbrk, aligns each heap arena
// to 512 KiB, and clears the gap it skips before putting it on its free
// list (runtime/mem_sbrk.go, memFree). Where the gap falls depends on
// where the module's data end, so one build writes 128 KiB of zeros and
// the next, a little smaller, 448 KiB: pages of private memory in every
// instance, which hold nothing. settle returns them to the kernel once
// the runtime has started; read again they are zero, as they were
// (RATIONALE: "Why does the host give back the pages of zeros an
// instance writes at its start?").

// settleScan bounds the memory settle reads past the image: a Go
// runtime's start writes less than 1 MiB there, and a guest that wrote
// more at its start pays for the rest itself.
const settleScan = 16 << 20

// settle gives back to the kernel the pages of zeros the guest wrote
// into its memories so far (dropZeroPages), past the image the first
// memory maps, within settleScan bytes of each memory. It is called
// once, when the guest's initialisation has returned, while no guest
// code runs.
func (t *memoryTracker) settle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, m := range t.memories {
		if !m.mapped || m.reserved == nil {
			continue
		}
		from := uint64(0)
		if i == 0 && t.image != nil {
			// Past the image only: a page of the image's mapping given
			// back would read as the image again, not as zeros.
			from = t.image.mapped()
		}
		if to := min(m.size, from+settleScan); from < to {
			dropZeroPages(m.reserved[from:to])
		}
	}
}
