package wasmrt

import (
	"sync"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryTracker is the wazero memory allocator of one instance. It backs
// every linear memory of the instance (the plugin's and the Extism
// kernel's), enforces the per-memory page limit itself and remembers a
// refused growth.
//
// Enforcing the limit here rather than only through wazero's own maximum is
// what lets the host tell a memory-limit failure from any other trap: when
// wazero refuses a memory.grow above the maximum it does so silently, the
// guest's runtime then aborts with an ordinary trap, and nothing in the
// error says why. A refusal seen here is exact and does not depend on the
// guest's language.
type memoryTracker struct {
	limit uint64 // bytes per memory
	// image, when set, is the initial content of the first memory
	// (image.go); imageLost records that it could not be loaded.
	image     *memImage
	imageLost bool

	mu       sync.Mutex
	memories []*trackedMemory
	refused  bool
}

func newMemoryTracker(limitBytes uint64, image *memImage) *memoryTracker {
	return &memoryTracker{limit: limitBytes, image: image}
}

// Allocate implements experimental.MemoryAllocator.
func (t *memoryTracker) Allocate(_, maxBytes uint64) experimental.LinearMemory {
	reserved, mapped := reserve(min(maxBytes, t.limit))
	m := &trackedMemory{t: t, reserved: reserved, mapped: mapped}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.image != nil && len(t.memories) == 0 && !t.image.load(reserved, mapped) {
		// A reservation below the image is refused as OverLimit; any other
		// failure as ImageLost.
		t.imageLost = len(reserved) >= t.image.size
	}
	t.memories = append(t.memories, m)
	return m
}

// ImageLost reports that the memory's initial content could not be read.
func (t *memoryTracker) ImageLost() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.imageLost
}

// Bytes is the total size of the instance's linear memories.
func (t *memoryTracker) Bytes() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n uint64
	for _, m := range t.memories {
		n += m.size
	}
	return n
}

// Count is how many memories the tracker backs.
func (t *memoryTracker) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.memories)
}

// Refused reports whether a memory was ever refused growth.
func (t *memoryTracker) Refused() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// refuse records a refused growth of kernel memory, which the instance
// serves itself.
func (t *memoryTracker) refuse() {
	t.mu.Lock()
	t.refused = true
	t.mu.Unlock()
}

// OverLimit reports whether a memory started above the limit (a module
// whose declared minimum is larger than the limit).
func (t *memoryTracker) OverLimit() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.memories {
		if m.size > t.limit {
			return true
		}
	}
	return false
}

// trackedMemory is one linear memory. Its whole allowed size is reserved
// up front (see reserve), so that growing it is only a longer slice over
// the same pages: no copy, and no old buffer left for the garbage
// collector. A Go guest grows its memory a few pages at a time while its
// runtime starts, so the copies of an appending allocator were a third of
// a warm load, and the garbage they left most of an instance's resident
// memory.
type trackedMemory struct {
	t        *memoryTracker
	reserved []byte // len is the reservation; nil once freed
	mapped   bool   // reserved is a mapping of the host's (reserve)
	heap     []byte // a memory whose declared minimum exceeds the reservation
	size     uint64
	sized    bool
}

// Reallocate implements experimental.LinearMemory. The first call sizes the
// memory to the module's declared minimum; it is never refused, because
// wazero cannot handle a refusal there, and OverLimit reports it instead.
func (m *trackedMemory) Reallocate(size uint64) []byte {
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if size > m.t.limit && m.sized {
		m.t.refused = true
		return nil
	}
	m.sized = true
	m.size = size
	if size > uint64(len(m.reserved)) {
		// Only the first sizing gets here (the module's minimum is above
		// the limit, which OverLimit reports): the instance is closed
		// before it runs, so an ordinary allocation does.
		m.heap = make([]byte, size)
		return m.heap
	}
	// Pages never handed out before are zero, as Wasm requires: the
	// reservation is fresh and memory never shrinks.
	return m.reserved[:size:size]
}

// Free implements experimental.LinearMemory. wazero calls it when the
// instance is closed, on the goroutine that closes it or, after a
// deadline, on the one whose call was stopped: never under a running guest
// (a module's runtime, which closes its instances, closes only after the
// last of them: Module.close).
func (m *trackedMemory) Free() {
	m.t.mu.Lock()
	r := m.reserved
	m.reserved, m.heap = nil, nil
	m.t.mu.Unlock()
	release(r)
}
