package host

import (
	"bytes"
	"encoding/json"
	"sync"
	"unsafe"
)

// validatedStates remembers the last few states a plugin's state_schema
// accepted, by identity: the same backing array and length. A state the
// host itself produced and stored in a session comes back unchanged on the
// next call, so it is not validated again; for a history kept in the state
// that saves reading the whole history on every call.
//
// Equal content at another address (a copy) is found by comparing bytes.
//
// Identity is sound because sessions are replaced, not edited: the host
// never writes into a state's bytes, and an embedder that edits
// session.ProviderState.Data in place instead of assigning a new slice defeats the
// check only for states it wrote itself. Entries hold their slice, so its
// memory cannot be reused for another state while remembered.
type validatedStates struct {
	mu      sync.Mutex
	entries [16]json.RawMessage
	next    int
}

func (c *validatedStates) contains(s json.RawMessage) bool {
	if len(s) == 0 {
		return false
	}
	p := unsafe.SliceData(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if len(e) == len(s) && unsafe.SliceData(e) == p {
			return true
		}
	}
	// A copy of an accepted state (Session.Clone, which every agent run
	// makes) is accepted too: a memcmp is far cheaper than validating.
	for _, e := range c.entries {
		if len(e) == len(s) && bytes.Equal(e, s) {
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
	c.entries[c.next] = s
	c.next = (c.next + 1) % len(c.entries)
	c.mu.Unlock()
}
