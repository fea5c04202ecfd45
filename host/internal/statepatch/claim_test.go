package statepatch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// TestTakeClaimedComparesAfterAnyEdit makes the worst cases for a Take that
// skips its compare: the claimed Doc edited to a document of the same
// length, edited and edited back, taken by another caller, dropped. Each
// must give a Doc of the bytes the Claim was made for, never the edited
// Doc; only an untouched Doc is handed out without a compare.
func TestTakeClaimedComparesAfterAnyEdit(t *testing.T) {
	const state = `{"messages":["a","b","c"]}`
	tests := []struct {
		name string
		// after runs between the Claim and TakeClaimed on the cache holding
		// the claimed Doc d.
		after func(t *testing.T, c *Cache, d *Doc)
		// same: TakeClaimed must hand out d itself.
		same bool
	}{
		{name: "untouched", after: func(*testing.T, *Cache, *Doc) {}, same: true},
		{name: "taken and put back unedited", after: func(t *testing.T, c *Cache, d *Doc) {
			got, err := c.Take([]byte(state))
			require.NoError(t, err)
			require.Same(t, d, got)
			c.Put(got)
		}, same: true},
		{name: "edited to the same length", after: func(t *testing.T, c *Cache, d *Doc) {
			editPut(t, c, d, `[{"op":"replace","path":"/messages/0","value":"z"}]`)
		}},
		{name: "edited and edited back", after: func(t *testing.T, c *Cache, d *Doc) {
			editPut(t, c, d, `[{"op":"replace","path":"/messages/0","value":"z"}]`)
			editPut(t, c, d, `[{"op":"replace","path":"/messages/0","value":"a"}]`)
		}},
		{name: "a failed patch rolled back", after: func(t *testing.T, c *Cache, d *Doc) {
			got, err := c.Take([]byte(state))
			require.NoError(t, err)
			require.Error(t, got.Apply(ops(t, `[{"op":"replace","path":"/messages/0","value":"z"},{"op":"remove","path":"/nothing"}]`), nil))
			c.Put(got)
		}},
		{name: "out with another caller", after: func(t *testing.T, c *Cache, d *Doc) {
			got, err := c.Take([]byte(state))
			require.NoError(t, err)
			require.Same(t, d, got)
		}},
		{name: "evicted", after: func(t *testing.T, c *Cache, d *Doc) {
			for i := range 3 {
				nd, err := Parse(fmt.Appendf(nil, `[%d]`, i))
				require.NoError(t, err)
				c.Put(nd)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache(2)
			raw := []byte(state)
			d, err := Parse(raw)
			require.NoError(t, err)
			c.Put(d)
			cl, ok := c.Claim(raw)
			require.True(t, ok)
			tt.after(t, c, d)

			got, err := c.TakeClaimed(raw, cl)
			require.NoError(t, err)
			assert.Equal(t, state, string(got.Bytes()), "TakeClaimed handed out a Doc that is not the claimed bytes")
			if tt.same {
				assert.Same(t, d, got, "an unedited claimed Doc was not handed out")
			} else {
				assert.True(t, got != d || d.Equal(raw), "an edited Doc was handed out without a compare")
			}
		})
	}
}

func editPut(t *testing.T, c *Cache, d *Doc, patch string) {
	t.Helper()
	got, err := c.Take(d.Bytes())
	require.NoError(t, err)
	require.Same(t, d, got)
	require.NoError(t, got.Apply(ops(t, patch), nil))
	c.Put(got)
}

// FuzzTakeClaimed drives a cache with claims, patches that keep or change
// the document's length, and takes, and checks every TakeClaimed against
// the full path (Take, which compares): the same document, always the bytes
// the Claim was made for.
func FuzzTakeClaimed(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{2, 2, 2, 0, 0, 1, 1, 3})
	f.Add([]byte{5, 4, 3, 2, 1, 0, 9, 8, 7, 6})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 64 {
			prog = prog[:64]
		}
		c := NewCache(2)
		// The states a caller holds, each with its Claim (zero if none).
		states := [][]byte{[]byte(`{"m":["a","b"]}`)}
		claims := []Claim{{}}
		values := []string{`"a"`, `"z"`, `"zz"`, `1`, `"a"`}
		for i, b := range prog {
			s := int(b>>4) % len(states)
			raw := states[s]
			switch b % 4 {
			case 0: // validate: claim
				if cl, ok := c.Claim(raw); ok {
					claims[s] = cl
				}
			case 1: // a call with the claim: take it, maybe patch, put back
				d, err := c.TakeClaimed(raw, claims[s])
				require.NoError(t, err)
				require.Equal(t, string(raw), string(d.Bytes()), "step %d: TakeClaimed gave another document", i)
				want, err := Parse(raw) // the full path
				require.NoError(t, err)
				require.True(t, want.Equal(d.Bytes()), "step %d: the full path disagrees", i)
				v := values[int(b>>2)%len(values)]
				if err := d.Apply([]abi.PatchOp{{Op: "replace", Path: "/m/0", Value: []byte(v)}}, nil); err == nil {
					next := d.Bytes()
					states = append(states, next)
					claims = append(claims, ClaimOf(d))
				}
				c.Put(d)
			case 2: // another caller takes the state's Doc and keeps it
				if d, err := c.Take(raw); err == nil && b&0x8 != 0 {
					c.Put(d)
				}
			case 3: // a state the caller got by value, unclaimed
				states = append(states, bytes.Clone(raw))
				claims = append(claims, Claim{})
			}
		}
	})
}
