package statepatch

import (
	"fmt"
	"sync"
	"testing"
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
