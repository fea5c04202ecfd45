package provider

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTrim(t *testing.T) {
	sys := stored{seq: 1, role: "system"}
	user := func(seq int64) stored { return stored{seq: seq, role: "user"} }
	call := func(seq int64, ids ...string) stored { return stored{seq: seq, role: "assistant", calls: ids} }
	result := func(seq int64, id string) stored { return stored{seq: seq, role: "tool", results: []string{id}} }
	tests := []struct {
		name string
		in   []stored
		max  int
		want []int64
	}{
		{"fits", []stored{user(1), user(2)}, 5, []int64{1, 2}},
		{"newest kept", []stored{user(1), user(2), user(3)}, 2, []int64{2, 3}},
		{"system kept", []stored{sys, user(5), user(6), user(7)}, 3, []int64{1, 6, 7}},
		{"system within the window", []stored{sys, user(2)}, 3, []int64{1, 2}},
		{"group whole", []stored{user(1), call(2, "a"), result(3, "a"), user(4)}, 3, []int64{2, 3, 4}},
		{"results without their call dropped", []stored{call(2, "a", "b"), result(3, "a"), result(4, "b"), user(5)}, 2, []int64{5}},
		{"one of two results cut", []stored{call(2, "a", "b"), result(3, "a"), result(4, "b"), user(5)}, 3, []int64{5}},
		{"orphans after system", []stored{sys, result(4, "b"), user(5)}, 5, []int64{1, 5}},
		{"empty", nil, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			for _, m := range trim(tt.in, tt.max) {
				got = append(got, m.seq)
			}
			assert.Equal(t, tt.want, got, "trim")
		})
	}
}
