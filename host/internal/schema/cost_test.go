package schema

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bombSchema is a chain of n levels, each naming the next twice in an
// allOf: a validator evaluates the last level 2^n times.
func bombSchema(n int, leaf string) json.RawMessage {
	var defs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":%q}`, n, leaf))
	return json.RawMessage(`{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/d0"}`)
}

// TestSchemaCostBounded: a schema whose validation would evaluate a
// subschema along exponentially many paths is refused when it compiles,
// before anything validates with it (at 60 levels validation ran for ever;
// at 20 it took 7 GB); one just under the bound compiles and validates; a
// recursive schema (a tree) is not refused for its recursion.
func TestSchemaCostBounded(t *testing.T) {
	for _, n := range []int{20, 60, 600} { // 600 levels: 1,803 objects, within maxSchemaObjects
		_, err := Compile(bombSchema(n, "object"), "bomb")
		require.ErrorIs(t, err, ErrBadSchema, "%d levels", n)
		assert.ErrorContains(t, err, "more than 200000 subschemas")
	}
	// 2^14 evaluations of the last level, about 2^16 subschemas in all:
	// under the bound.
	s, err := Compile(bombSchema(14, "object"), "small")
	require.NoError(t, err)
	require.NoError(t, s.Validate(json.RawMessage(`{}`)))
	tree, err := Compile(json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`), "tree")
	require.NoError(t, err)
	require.NoError(t, tree.Validate(json.RawMessage(`{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}`)))
}
