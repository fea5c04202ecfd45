package statepatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wasmhist/wasmhist/host/internal/schema"
)

func TestCacheFindsDocByIdentity(t *testing.T) {
	c := NewCache(2)
	raw := []byte(`{"messages":[]}`)
	d, err := c.Take(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(ops(t, `[{"op":"add","path":"/messages/-","value":1}]`), nil); err != nil {
		t.Fatal(err)
	}
	state := d.Bytes()
	c.Put(d)
	if got, _ := c.Take(state); got != d {
		t.Fatal("Take of the bytes a cached Doc returned did not find it")
	}
	if c.Len() != 0 {
		t.Fatalf("Take left %d entries; it must remove what it returns", c.Len())
	}
	c.Put(d)
	copied := append([]byte(nil), state...)
	if got, _ := c.Take(copied); got == d {
		t.Fatal("equal bytes at another address found the cached Doc")
	}
	if got, _ := c.Take(state[:len(state)-1]); got == d {
		t.Fatal("a prefix of the bytes found the cached Doc")
	}
	// Bounded: the oldest entry goes.
	for i := range 3 {
		nd, _ := Parse([]byte(fmt.Sprintf(`[%d]`, i)))
		c.Put(nd)
	}
	if c.Len() != 2 {
		t.Fatalf("cache holds %d, want 2", c.Len())
	}
	if got, _ := c.Take(state); got == d {
		t.Fatal("the evicted Doc was still found")
	}
}

// TestCacheHammer runs Take/Apply/Put chains on one cache from many
// goroutines, each on its own document; run with -race.
func TestCacheHammer(t *testing.T) {
	c := NewCache(4)
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			state := []byte(fmt.Sprintf(`{"w":%d,"messages":[]}`, w))
			for i := range rounds {
				d, err := c.Take(state)
				if err != nil {
					t.Error(err)
					return
				}
				if err := d.Apply(ops(t, fmt.Sprintf(`[{"op":"add","path":"/messages/-","value":%d}]`, i)), nil); err != nil {
					t.Error(err)
					return
				}
				state = d.Bytes()
				c.Put(d)
			}
			d, _ := c.Take(state)
			el, err := d.Elements("/messages")
			if err != nil || len(el) != rounds || string(el[rounds-1]) != fmt.Sprint(rounds-1) {
				t.Errorf("worker %d: %d messages, last %s, %v", w, len(el), el[len(el)-1], err)
			}
		}()
	}
	wg.Wait()
}

func TestCacheApplyAndElements(t *testing.T) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(4)
	state := []byte(`{"messages":[]}`)
	for i := range 3 {
		next, err := c.Apply(state, ops(t, fmt.Sprintf(`[{"op":"add","path":"/messages/-","value":{"role":"user","contents":[],"message_id":"m%d"}}]`, i)), s)
		if err != nil {
			t.Fatal(err)
		}
		state = next
	}
	if c.Len() != 1 {
		t.Fatalf("cache holds %d Docs for one evolving state, want 1", c.Len())
	}
	el, err := c.Elements(state, "/messages")
	if err != nil || len(el) != 3 || !strings.Contains(string(el[2]), `"m2"`) {
		t.Fatalf("Elements = %s, %v", el, err)
	}
	before := string(state)
	_, err = c.Apply(state, ops(t, `[{"op":"add","path":"/messages/-","value":{"role":"robot","contents":[]}}]`), s)
	if !errors.Is(err, schema.ErrInvalid) {
		t.Fatalf("invalid message accepted: %v", err)
	}
	if string(state) != before {
		t.Fatal("a refused patch changed the state")
	}
	if _, err := c.Apply([]byte(`{`), nil, s); !errors.Is(err, ErrDocument) {
		t.Fatalf("Apply on a broken state = %v, want ErrDocument", err)
	}
}

// TestCacheContentMatchIsACopy checks that a copy of a cached state is served
// from the cache's index (no parse) but never shares the cached bytes: a
// session cloned from another must not edit the original's bytes.
func TestCacheContentMatchIsACopy(t *testing.T) {
	c := NewCache(2)
	d, err := c.Take([]byte(`{"messages":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get("/messages/1"); err != nil { // index the array
		t.Fatal(err)
	}
	original := d.Bytes()
	before := string(original)
	c.Put(d)

	copied := append([]byte(nil), original...)
	got, err := c.Take(copied)
	if err != nil {
		t.Fatal(err)
	}
	if got == d {
		t.Fatal("a content match returned the cached Doc itself; it must be a copy")
	}
	if !got.root.indexed || len(got.root.kids) != 1 || !got.root.kids[0].indexed {
		t.Fatal("the copy did not keep the cached index")
	}
	if c.Len() != 1 {
		t.Fatalf("a content match must leave the cached Doc in place; cache holds %d", c.Len())
	}
	if err := got.Apply(ops(t, `[{"op":"add","path":"/messages/-","value":3}]`), nil); err != nil {
		t.Fatal(err)
	}
	if string(got.Bytes()) != `{"messages":[1,2,3]}` {
		t.Fatalf("patched copy = %s", got.Bytes())
	}
	if string(original) != before {
		t.Fatalf("patching the copy changed the original bytes: %s", original)
	}
}
