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

	mu       sync.Mutex
	memories []*trackedMemory
	refused  bool
}

func newMemoryTracker(limitBytes uint64) *memoryTracker {
	return &memoryTracker{limit: limitBytes}
}

// Allocate implements experimental.MemoryAllocator.
func (t *memoryTracker) Allocate(capBytes, _ uint64) experimental.LinearMemory {
	m := &trackedMemory{t: t, buf: make([]byte, 0, min(capBytes, t.limit))}
	t.mu.Lock()
	t.memories = append(t.memories, m)
	t.mu.Unlock()
	return m
}

// Bytes is the total size of the instance's linear memories.
func (t *memoryTracker) Bytes() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n uint64
	for _, m := range t.memories {
		n += uint64(len(m.buf))
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

// OverLimit reports whether a memory started above the limit (a module
// whose declared minimum is larger than the limit).
func (t *memoryTracker) OverLimit() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.memories {
		if uint64(len(m.buf)) > t.limit {
			return true
		}
	}
	return false
}

type trackedMemory struct {
	t     *memoryTracker
	buf   []byte
	sized bool
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
	if n := uint64(len(m.buf)); size > n {
		// append of a fresh zeroed slice amortises like wazero's default
		// allocator and leaves the new pages zeroed, as Wasm requires.
		m.buf = append(m.buf, make([]byte, size-n)...)
	}
	return m.buf[:size]
}

// Free implements experimental.LinearMemory.
func (m *trackedMemory) Free() {
	m.t.mu.Lock()
	m.buf = nil
	m.t.mu.Unlock()
}
