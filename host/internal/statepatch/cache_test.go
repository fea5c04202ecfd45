package statepatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/schema"
)

func TestCacheFindsDocByContent(t *testing.T) {
	c := NewCache(2)
	raw := []byte(`{"messages":[]}`)
	d, err := c.Take(raw)
	require.NoError(t, err)
	require.NoError(t, d.Apply(ops(t, `[{"op":"add","path":"/messages/-","value":1}]`), nil))
	state := d.Bytes()
	c.Put(d)

	got, err := c.Take(state)
	require.NoError(t, err)
	require.Same(t, d, got, "Take of the bytes a cached Doc returned did not find it")
	require.Zero(t, c.Len(), "Take must remove what it returns")
	c.Put(d)

	got, err = c.Take(bytes.Clone(state))
	require.NoError(t, err)
	require.Same(t, d, got, "equal bytes at another address must find the cached Doc: content is the key")
	c.Put(d)

	got, err = c.Take(state[:len(state)-1])
	require.Error(t, err, "a prefix of the document is not JSON")
	assert.Nil(t, got)

	// Bounded: the oldest entry goes.
	for i := range 3 {
		nd, err := Parse(fmt.Appendf(nil, `[%d]`, i))
		require.NoError(t, err)
		c.Put(nd)
	}
	require.Equal(t, 2, c.Len())
	got, err = c.Take(state)
	require.NoError(t, err)
	assert.NotSame(t, d, got, "the evicted Doc was still found")
}

// TestCacheIgnoresEditsToReturnedBytes edits, in place, the bytes a Doc
// returned: the Doc must not be found for them (they are no longer its
// document), and the Doc's own document must not change.
func TestCacheIgnoresEditsToReturnedBytes(t *testing.T) {
	c := NewCache(2)
	d, err := c.Take([]byte(`{"messages":[1,2]}`))
	require.NoError(t, err)
	state := d.Bytes()
	c.Put(d)

	require.True(t, cached(c, state))
	state[len(`{"messages":[`)] = '7' // the caller's bytes: {"messages":[7,2]}
	assert.False(t, cached(c, state), "edited bytes reported as the cached document")
	got, err := c.Take(state)
	require.NoError(t, err)
	assert.NotSame(t, d, got, "edited bytes found the Doc of what they were before")
	el, err := got.Elements("/messages")
	require.NoError(t, err)
	assert.Equal(t, "7", string(el[0]), "the Doc for the edited bytes must parse them as they are")

	assert.True(t, cached(c, []byte(`{"messages":[1,2]}`)), "the cached Doc's document changed with the caller's bytes")
}

// TestCacheBytesAreNeverWritten keeps every state a chain of patches
// returned, with a copy of each, and checks after the chain that none of
// them changed: an append is a splice into the Doc's own buffer, never into
// bytes it handed out.
func TestCacheBytesAreNeverWritten(t *testing.T) {
	c := NewCache(2)
	state := []byte(`{"messages":[],"meta":{"n":0}}`)
	type kept struct{ state, copy []byte }
	var all []kept
	for i := range 50 {
		patch := fmt.Sprintf(`[{"op":"add","path":"/messages/-","value":%d},{"op":"replace","path":"/meta/n","value":%d}]`, i, i)
		if i%10 == 9 {
			patch = `[{"op":"remove","path":"/messages/0"}]`
		}
		next, err := c.Apply(state, ops(t, patch), nil)
		require.NoError(t, err)
		all = append(all, kept{next, bytes.Clone(next)})
		state = next
	}
	for i, k := range all {
		require.Equal(t, string(k.copy), string(k.state), "state %d changed after later patches", i)
	}
	require.Equal(t, 1, c.Len(), "one evolving state needs one Doc")
}

// TestCacheHammer runs Take/Apply/Put chains on one cache from many
// goroutines, some on the same document; run with -race.
func TestCacheHammer(t *testing.T) {
	c := NewCache(4)
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Pairs of workers start from equal bytes, so they compete for
			// one cached Doc.
			state := fmt.Appendf(nil, `{"w":%d,"messages":[]}`, w/2)
			var kept [][2][]byte
			for i := range rounds {
				d, err := c.Take(state)
				if !assert.NoError(t, err) {
					return
				}
				var o []any
				o = append(o, map[string]any{"op": "add", "path": "/messages/-", "value": i})
				patch, _ := json.Marshal(o)
				if !assert.NoError(t, d.Apply(ops(t, string(patch)), nil)) {
					return
				}
				state = d.Bytes()
				c.Put(d)
				kept = append(kept, [2][]byte{state, bytes.Clone(state)})
			}
			d, err := c.Take(state)
			if !assert.NoError(t, err) {
				return
			}
			el, err := d.Elements("/messages")
			if assert.NoError(t, err) && assert.Len(t, el, rounds, "worker %d", w) {
				assert.Equal(t, fmt.Sprint(rounds-1), string(el[rounds-1]), "worker %d", w)
			}
			c.Put(d)
			for i, k := range kept {
				assert.Equal(t, string(k[1]), string(k[0]), "worker %d: state %d changed", w, i)
			}
		}()
	}
	wg.Wait()
}

func TestCacheApply(t *testing.T) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	require.NoError(t, err)
	c := NewCache(4)
	state := []byte(`{"messages":[]}`)
	for i := range 3 {
		next, err := c.Apply(state, ops(t, fmt.Sprintf(`[{"op":"add","path":"/messages/-","value":{"role":"user","contents":[],"message_id":"m%d"}}]`, i)), s)
		require.NoError(t, err)
		state = next
	}
	require.Equal(t, 1, c.Len(), "one evolving state needs one Doc")
	d, err := c.Take(state)
	require.NoError(t, err)
	el, err := d.Elements("/messages")
	require.NoError(t, err)
	require.Len(t, el, 3)
	assert.True(t, strings.Contains(string(el[2]), `"m2"`), "Elements = %s", el)
	c.Put(d)

	before := string(state)
	_, err = c.Apply(state, ops(t, `[{"op":"add","path":"/messages/-","value":{"role":"robot","contents":[]}}]`), s)
	require.ErrorIs(t, err, schema.ErrInvalid, "invalid message accepted")
	require.Equal(t, before, string(state), "a refused patch changed the state")
	require.True(t, cached(c, state), "a refused patch must leave the Doc at the state it had")

	_, err = c.Apply([]byte(`{`), nil, s)
	require.ErrorIs(t, err, ErrDocument)
}

// cached reports whether c holds a Doc of raw.
func cached(c *Cache, raw []byte) bool {
	_, ok := c.Claim(raw)
	return ok
}
