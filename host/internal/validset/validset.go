// Package validset remembers documents a schema accepted, by content, so
// that the same bytes coming back are not validated again.
package validset

import (
	"hash/maphash"
	"sync"
	"unsafe"
)

// Set remembers the last few documents one schema accepted, by content:
// their length and a keyed 64-bit hash. A plugin's state the host produced
// comes back unchanged on the next call, and a copy of it (Session.Clone,
// which every agent run makes) is the same content, so neither is validated
// again; for a history kept in the state that saves reading the whole
// history through the validator on every call. A session document a
// commit encoded is encoded again by the store and read back by the next
// turn's load: the same content, each time.
//
// Content, not the identity of the bytes: a session's bytes are its
// holder's, who may edit them in place, and an identity match would then
// accept bytes nobody validated. Hashing reads the state once (about 25 µs
// for half a megabyte, against about 50 ms to validate it). The hash is
// maphash, seeded per cache from a random seed, so neither a plugin nor a
// caller can aim for a collision; two different states of the same length
// pass for each other with probability 2^-64 per remembered entry.
//
// A Set is safe for concurrent use; its zero value is empty.
type Set struct {
	mu      sync.Mutex
	seed    maphash.Seed
	seeded  bool
	entries [16]stateSum
	next    int
}

// stateSum identifies a state's content; n == 0 is an empty entry.
type stateSum struct {
	n int
	h uint64
}

func (c *Set) sum(s []byte) stateSum {
	if !c.seeded {
		c.seed, c.seeded = maphash.MakeSeed(), true
	}
	// Comparable hashes a string in one pass of the runtime's AES hash,
	// about 20 GB/s here; maphash.Bytes goes 128 bytes at a time and
	// reaches 2-3 GB/s. The string is a view of s for the call only.
	return stateSum{n: len(s), h: maphash.Comparable(c.seed, unsafe.String(unsafe.SliceData(s), len(s)))}
}

// Contains reports whether s is the content of a document added.
func (c *Set) Contains(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum stateSum
	for _, e := range c.entries {
		if e.n != len(s) {
			continue
		}
		if sum.n == 0 {
			sum = c.sum(s) // only when a remembered state has this length
		}
		if e == sum {
			return true
		}
	}
	return false
}

// Add remembers s, which the schema accepted, forgetting the oldest of
// the last 16 documents added.
func (c *Set) Add(s []byte) {
	if len(s) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[c.next] = c.sum(s)
	c.next = (c.next + 1) % len(c.entries)
}
