package host

import (
	"encoding/json"
	"testing"
)

func TestValidatedStates(t *testing.T) {
	var c validatedStates
	accepted := json.RawMessage(`{"messages":[{"role":"user"}]}`)
	c.add(accepted)

	tests := []struct {
		name  string
		state json.RawMessage
		want  bool
	}{
		{name: "same bytes", state: accepted, want: true},
		{name: "a copy (Session.Clone)", state: append(json.RawMessage(nil), accepted...), want: true},
		{name: "same length, other content", state: json.RawMessage(`{"messages":[{"role":"tool"}]}`), want: false},
		{name: "prefix of the accepted bytes", state: accepted[:len(accepted)-1], want: false},
		{name: "empty", state: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.contains(tt.state); got != tt.want {
				t.Fatalf("contains(%s) = %v, want %v", tt.state, got, tt.want)
			}
		})
	}

	// Bounded: after as many other states as it holds, the first is gone.
	for i := range len(c.entries) {
		c.add(json.RawMessage(`{"n":` + string(rune('0'+i%10)) + `}`))
	}
	if c.contains(accepted) {
		t.Fatal("the oldest state was still remembered after the cache filled")
	}
}
