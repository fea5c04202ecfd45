package statepatch

import (
	"container/list"
	"encoding/json"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

// Cache keeps indexed Docs between calls so that patching the state a
// previous patch produced needs no scan. A Doc is found by content: the
// bytes handed to Take equal the Doc's document. Content, not the identity
// of the bytes, because the bytes a caller passes are the caller's to edit:
// equal content is the only thing that makes a Doc the parsed form of them.
// The comparison is a memcmp that stops at the first differing byte, and
// only Docs of the same length are compared.
//
// Take removes the Doc from the cache, so that a Doc is only ever used by
// one goroutine; Put returns it. A Cache is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *Doc; front: most recently put
}

// NewCache returns a cache of at most size Docs (at least 1).
func NewCache(size int) *Cache {
	return &Cache{max: max(size, 1), order: list.New()}
}

// Take returns a cached Doc whose document is raw, removing it from the
// cache, or parses raw into a new Doc.
//
// The cached Doc itself is handed out, not a copy: a Doc never hands out
// its buffer (Bytes copies), so no one else can be looking at the bytes it
// is about to edit.
func (c *Cache) Take(raw []byte) (*Doc, error) {
	if d := c.take(raw); d != nil {
		return d, nil
	}
	return Parse(raw)
}

func (c *Cache) take(raw []byte) *Doc {
	if len(raw) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil; e = e.Next() {
		if d := e.Value.(*Doc); d.Equal(raw) {
			c.order.Remove(e)
			return d
		}
	}
	return nil
}

// A Claim is the record that a cached Doc's document was found equal to
// some bytes: the Doc and its count of edits then. While the Doc's count
// is unchanged its document is still those bytes, so TakeClaimed can hand
// it out for them without comparing again. The zero Claim claims nothing.
type Claim struct {
	d     *Doc
	edits uint64
}

// Claim reports whether a cached Doc's document is raw, and returns the
// Claim of the Doc found. Every Doc the host puts back holds a state that
// passed the state schema, so this answers "was raw validated?" without
// validating it; and the one compare serves the Take of the Doc later in
// the same call too (TakeClaimed).
func (c *Cache) Claim(raw []byte) (Claim, bool) {
	if len(raw) == 0 {
		return Claim{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil; e = e.Next() {
		if d := e.Value.(*Doc); d.Equal(raw) {
			return Claim{d: d, edits: d.edits}, true
		}
	}
	return Claim{}, false
}

// TakeClaimed is Take(raw) for bytes cl was made for: those bytes, unchanged
// since. When cl's Doc is still in the cache and has not been edited since
// cl was made, it is taken without comparing raw with it; otherwise (the
// Doc was dropped, or is out with another caller, or was edited) raw is
// found by content as Take finds it. The Doc's own count of edits is the
// proof, never the length or the position of raw: a Doc edited and edited
// back is compared again.
//
// The caller must hold raw unchanged from the Claim on: the bytes the
// Claim compared are the bytes TakeClaimed stands for.
func (c *Cache) TakeClaimed(raw []byte, cl Claim) (*Doc, error) {
	if d := c.takeClaimed(raw, cl); d != nil {
		return d, nil
	}
	return c.Take(raw)
}

func (c *Cache) takeClaimed(raw []byte, cl Claim) *Doc {
	if cl.d == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil; e = e.Next() {
		if d := e.Value.(*Doc); d == cl.d {
			if d.edits != cl.edits || len(d.buf) != len(raw) {
				return nil
			}
			c.order.Remove(e)
			return d
		}
	}
	return nil
}

// ClaimOf returns the Claim that d's document is what d.Bytes returns now,
// for a caller that holds d (taken from the cache) and the bytes it copied
// out of it, to take d again for them after Put.
func ClaimOf(d *Doc) Claim { return Claim{d: d, edits: d.edits} }

// Put keeps d for a later Take of its current document. The caller must
// not use d, or any view it returned, after Put.
func (c *Cache) Put(d *Doc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.PushFront(d)
	for c.order.Len() > c.max {
		c.order.Remove(c.order.Back())
	}
}

// Len reports how many Docs the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Apply patches a state through the cache: the state's Doc is found (or
// parsed), patched and kept, and a copy of the patched state returned.
// state must be valid against s already (the host validates a state before
// its first use); then the patched state is valid against s or Apply fails
// and state is unchanged.
func (c *Cache) Apply(state []byte, ops []abi.PatchOp, s *schema.Schema) (json.RawMessage, error) {
	d, err := c.Take(state)
	if err != nil {
		return nil, err
	}
	defer c.Put(d)
	if err := d.Apply(ops, s); err != nil {
		return nil, err
	}
	return d.Bytes(), nil
}
