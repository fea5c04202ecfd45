package provider

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

func TestTrim(t *testing.T) {
	sys := stored{seq: 1, system: true}
	user := func(seq int64) stored { return stored{seq: seq} }
	call := func(seq int64, ids ...string) stored { return stored{seq: seq, calls: ids} }
	result := func(seq int64, id string) stored { return stored{seq: seq, results: []string{id}} }
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

// TestReadWindow takes apart documents as selectWindow writes them: the
// bodies are cut by their stored sizes when those account for the array
// exactly, and found by scanning it when the host's compaction changed a
// body's length.
func TestReadWindow(t *testing.T) {
	sys := `{"role":"system","contents":[]}`
	a := `{"role":"user","contents":[{"type":"text","text":"a, \"b\" ]}"}]}`
	b := `{"role":"assistant","contents":[{"type":"function_call","call_id":"c1"}]}`
	c := `{"role":"tool","contents":[{"type":"function_result","call_id":"c1"}]}`
	size := func(s string) string { return strconv.Itoa(len(s)) }
	tests := []struct {
		name string
		doc  string
		want []stored
	}{
		{"no message", ``, nil},
		{"sliced by size", `[[[1,` + size(sys) + `,1,null,null],[1,` + size(sys) + `,1,null,null],[7,` + size(a) + `,0,null,null],[8,` + size(b) + `,0,["c1"],null],[9,` + size(c) + `,0,null,["c1"]]],[` +
			sys + `,` + sys + `,` + a + `,` + b + `,` + c + `]]`,
			[]stored{{seq: 1, system: true, body: json.RawMessage(sys)}, {seq: 7, body: json.RawMessage(a)},
				{seq: 8, calls: []string{"c1"}, body: json.RawMessage(b)}, {seq: 9, results: []string{"c1"}, body: json.RawMessage(c)}}},
		// a stored with white space: the host sent it compacted, 2 bytes shorter.
		{"compacted by the host: scanned", `[[[7,` + strconv.Itoa(len(a)+2) + `,0,null,null],[8,` + size(b) + `,0,["c1"],null]],[` + a + `,` + b + `]]`,
			[]stored{{seq: 7, body: json.RawMessage(a)}, {seq: 8, calls: []string{"c1"}, body: json.RawMessage(b)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc json.RawMessage
			if tt.doc != "" {
				doc = json.RawMessage(tt.doc)
			}
			got, err := readWindow(doc, 2)
			require.NoError(t, err)
			for i := range got {
				got[i].size = 0
			}
			assert.Equal(t, tt.want, got)
		})
	}
	for _, bad := range []string{`[]`, `[[[1,2,0,null]],[{}]]`, `[[[1,2,0,null,null]],[{}]`, `[[[1,2,0,null,null]],[{},{}]]`, `[[[1,2,0,[1],null]],[{}]]`} {
		t.Run("malformed "+bad, func(t *testing.T) {
			_, err := readWindow(json.RawMessage(bad), 0)
			require.ErrorIs(t, err, abi.ErrInternal)
		})
	}
}
