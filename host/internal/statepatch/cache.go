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

// Contains reports whether a cached Doc's document is raw. Every Doc the
// host puts back holds a state that passed the state schema, so this
// answers "was raw validated?" without validating it.
func (c *Cache) Contains(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil; e = e.Next() {
		if e.Value.(*Doc).Equal(raw) {
			return true
		}
	}
	return false
}

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
