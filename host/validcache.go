package host

import (
	"encoding/json"
	"hash/maphash"
	"sync"
	"unsafe"
)

// validatedStates remembers the last few states a plugin's state_schema
// accepted, by content: their length and a keyed 64-bit hash. A state the
// host produced comes back unchanged on the next call, and a copy of it
// (Session.Clone, which every agent run makes) is the same content, so
// neither is validated again; for a history kept in the state that saves
// reading the whole history through the validator on every call.
//
// Content, not the identity of the bytes: a session's bytes are its
// holder's, who may edit them in place, and an identity match would then
// accept bytes nobody validated. Hashing reads the state once (about 25 µs
// for half a megabyte, against about 50 ms to validate it). The hash is
// maphash, seeded per cache from a random seed, so neither a plugin nor a
// caller can aim for a collision; two different states of the same length
// pass for each other with probability 2^-64 per remembered entry.
//
// States a patch produced are not added here: the plugin's statepatch.Cache
// holds their Docs and recognises them by comparing bytes, which is exact.
type validatedStates struct {
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

func (c *validatedStates) sum(s json.RawMessage) stateSum {
	if !c.seeded {
		c.seed, c.seeded = maphash.MakeSeed(), true
	}
	// Comparable hashes a string in one pass of the runtime's AES hash,
	// about 20 GB/s here; maphash.Bytes goes 128 bytes at a time and
	// reaches 2-3 GB/s. The string is a view of s for the call only.
	return stateSum{n: len(s), h: maphash.Comparable(c.seed, unsafe.String(unsafe.SliceData(s), len(s)))}
}

func (c *validatedStates) contains(s json.RawMessage) bool {
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

func (c *validatedStates) add(s json.RawMessage) {
	if len(s) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[c.next] = c.sum(s)
	c.next = (c.next + 1) % len(c.entries)
}
