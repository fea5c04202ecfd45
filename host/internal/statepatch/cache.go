package statepatch

import (
	"bytes"
	"container/list"
	"encoding/json"
	"sync"
	"unsafe"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

// Cache keeps indexed Docs between calls so that patching the state a
// previous patch produced needs no scan. A Doc is found by the identity of
// the bytes it last returned from Bytes (same first byte, same length): the
// state a session slot holds after a patch is exactly that slice. Bytes
// with the same content at another address are a miss and get parsed.
//
// Take removes the Doc from the cache, so that a Doc is only ever used by
// one goroutine; Put returns it. A Cache is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int
	docs  map[ident]*list.Element
	order *list.List // front: most recently put
}

type ident struct {
	p *byte
	n int
}

type entry struct {
	id  ident
	doc *Doc
}

func identOf(b []byte) ident {
	return ident{unsafe.SliceData(b), len(b)}
}

// NewCache returns a cache of at most size Docs (at least 1).
func NewCache(size int) *Cache {
	return &Cache{max: max(size, 1), docs: make(map[ident]*list.Element), order: list.New()}
}

// Take returns the Doc whose Bytes are raw, removing it from the cache, or
// a copy of a cached Doc with the same content, or parses raw into a new Doc.
//
// The content match serves copies of a state (Session.Clone, a session
// decoded again): comparing bytes and copying an index costs a memcmp and a
// memcpy, where parsing costs a validating scan of the whole document. The
// match is handed a copy because the cached Doc's bytes are still viewed by
// whichever session the state was copied from.
func (c *Cache) Take(raw []byte) (*Doc, error) {
	if len(raw) > 0 {
		id := identOf(raw)
		c.mu.Lock()
		if e, ok := c.docs[id]; ok {
			delete(c.docs, id)
			c.order.Remove(e)
			c.mu.Unlock()
			return e.Value.(*entry).doc, nil
		}
		for e := c.order.Front(); e != nil; e = e.Next() {
			d := e.Value.(*entry).doc
			if len(d.buf) == len(raw) && bytes.Equal(d.buf, raw) {
				cp := d.Clone()
				c.mu.Unlock()
				return cp, nil
			}
		}
		c.mu.Unlock()
	}
	return Parse(raw)
}

// Put keeps d for a later Take of its current Bytes. The caller must not
// use d after Put.
func (c *Cache) Put(d *Doc) {
	id := identOf(d.buf)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.docs[id]; ok {
		c.order.Remove(e)
	}
	c.docs[id] = c.order.PushFront(&entry{id: id, doc: d})
	for c.order.Len() > c.max {
		e := c.order.Back()
		c.order.Remove(e)
		delete(c.docs, e.Value.(*entry).id)
	}
}

// Len reports how many Docs the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Apply patches a state through the cache: the state's Doc is found (or
// parsed), patched and kept, and the patched state returned. state must be
// valid against s already (the host validates a state before its first use);
// then the patched state is valid against s or Apply fails and state is
// unchanged.
//
// The returned bytes are the Doc's view: they stay intact until they are
// passed to Apply again, which may extend them in place. Whoever stores them
// must not keep an older state's bytes without copying them.
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

// Elements returns the elements of the array at pointer in state, without
// decoding them, through the cache. They stay valid until state is next
// patched.
func (c *Cache) Elements(state []byte, pointer string) ([]json.RawMessage, error) {
	d, err := c.Take(state)
	if err != nil {
		return nil, err
	}
	defer c.Put(d)
	return d.Elements(pointer)
}
