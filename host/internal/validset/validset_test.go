package validset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSet(t *testing.T) {
	var c Set
	accepted := json.RawMessage(`{"messages":[{"role":"user"}]}`)
	c.Add(accepted)

	tests := []struct {
		name  string
		state json.RawMessage
		want  bool
	}{
		{name: "same bytes", state: accepted, want: true},
		{name: "a copy (Session.Clone)", state: bytes.Clone(accepted), want: true},
		{name: "same length, other content", state: json.RawMessage(`{"messages":[{"role":"tool"}]}`), want: false},
		{name: "prefix of the accepted bytes", state: accepted[:len(accepted)-1], want: false},
		{name: "empty", state: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, c.Contains(tt.state), "contains(%s)", tt.state)
		})
	}

	// Bounded: after as many other states as it holds, the first is gone.
	for i := range len(c.entries) {
		c.Add(json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
	}
	assert.False(t, c.Contains(accepted), "the oldest state was still remembered after the cache filled")
}

// TestSetEditedInPlace edits the very bytes that were accepted:
// the cache must not vouch for them any more, whatever their address.
func TestSetEditedInPlace(t *testing.T) {
	var c Set
	state := json.RawMessage(`{"messages":[{"role":"user"}]}`)
	c.Add(state)
	copy(state[len(`{"messages":[{"role":"`):], "robo")
	assert.False(t, c.Contains(state), "bytes edited in place after validation were reported valid")
	assert.True(t, c.Contains(json.RawMessage(`{"messages":[{"role":"user"}]}`)), "the accepted content was forgotten")
}

// BenchmarkSetContains is the cost of recognising a
// half-megabyte state the plugin already accepted: one hash of it.
func BenchmarkSetContains(b *testing.B) {
	state := json.RawMessage(`{"messages":[` + string(bytes.Repeat([]byte(`"0123456789abcdef",`), 512<<10/19)) + `"x"]}`)
	var c Set
	c.Add(state)
	other := bytes.Clone(state)
	b.SetBytes(int64(len(state)))
	b.ReportAllocs()
	for b.Loop() {
		if !c.Contains(other) {
			b.Fatal("not found")
		}
	}
}
