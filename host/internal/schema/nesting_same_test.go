package schema

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/schemas"
)

// sameSchemas use every keyword that evaluates a subschema, so that a
// wrapper stands at each kind of link: in place ($ref, $dynamicRef,
// allOf, anyOf, oneOf, not, if/then/else, dependentSchemas) and per
// member or element (properties, patternProperties, additionalProperties,
// propertyNames, items, prefixItems, contains, unevaluated*).
var sameSchemas = []string{
	`{"type":"object","properties":{"a":{"type":"integer","minimum":2},"b":{"$ref":"#/$defs/s"}},"required":["a"],
	  "patternProperties":{"^x":{"type":"string","maxLength":3}},"additionalProperties":{"type":"boolean"},
	  "propertyNames":{"maxLength":4},"$defs":{"s":{"type":"string","format":"date"}}}`,
	`{"type":"array","prefixItems":[{"type":"string"},{"enum":[1,2]}],"items":{"type":"number"},
	  "contains":{"const":7},"minContains":1,"maxContains":2,"uniqueItems":true}`,
	`{"allOf":[{"type":"object"},{"required":["k"]}],"anyOf":[{"properties":{"k":{"type":"string"}}},{"properties":{"k":{"type":"integer"}}}],
	  "oneOf":[{"properties":{"k":{"minimum":0}}},{"properties":{"k":{"maximum":0}}}],"not":{"required":["z"]}}`,
	`{"if":{"properties":{"t":{"const":"n"}}},"then":{"properties":{"v":{"type":"number"}}},"else":{"properties":{"v":{"type":"string"}}},
	  "dependentSchemas":{"d":{"required":["e"]}},"unevaluatedProperties":false,"properties":{"t":true,"d":true,"e":true}}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
	  "unevaluatedProperties":false}},"$ref":"#/$defs/node"}`,
	`{"$id":"https://example.test/tree","$dynamicAnchor":"node","type":"object",
	  "properties":{"data":true,"children":{"type":"array","items":{"$dynamicRef":"#node"}}},
	  "$defs":{"strict":{"$id":"strict","$dynamicAnchor":"node","$ref":"tree","unevaluatedProperties":false}}}`,
	`{"type":"array","items":{"$ref":"` + schemas.ID(schemas.Message) + `"}}`,
	`{"type":"array","prefixItems":[true,false],"unevaluatedItems":{"type":"null"}}`,
}

var sameDocs = []string{
	`{}`, `[]`, `null`, `1`, `"x"`,
	`{"a":3,"b":"2024-01-02","xa":"abc","c":true}`,
	`{"a":1,"b":"nope","xa":"abcd","c":1,"longname":true}`,
	`["s",1,2.5,7]`, `["s",3,7,7,7]`, `[1,2]`, `["s",1,1]`,
	`{"k":"s"}`, `{"k":0}`, `{"k":5,"z":1}`, `{"k":[]}`,
	`{"t":"n","v":1}`, `{"t":"n","v":"s"}`, `{"t":"m","v":"s","d":1}`, `{"t":"m","v":1,"d":1,"e":2,"f":3}`,
	`{"v":1,"kids":[{"v":2,"kids":[]},{"v":"x"},{"v":3,"extra":1}]}`,
	`{"data":1,"children":[{"data":2,"children":[{"extra":true}]}]}`,
	`[{"role":"user","contents":[{"type":"text","text":"hi"}]},{"role":"nobody"},{"role":"user","contents":[{"type":"text"}]}]`,
	`[null,1]`, `[1,1,null,2]`, `[true]`,
}

// TestNestingSameVerdicts: wrapping every subschema changes nothing a
// validation reports: for each schema and document, the verdict and the
// problems are those of the schema compiled without wrappers (and without
// counting).
func TestNestingSameVerdicts(t *testing.T) {
	for i, raw := range sameSchemas {
		wrapped, err := Compile(json.RawMessage(raw), fmt.Sprint("s", i))
		require.NoError(t, err, raw)
		root, err := compileRoot(json.RawMessage(raw), fmt.Sprint("s", i))
		require.NoError(t, err)
		plain := &Schema{name: wrapped.name, s: root}
		for _, doc := range sameDocs {
			want, got := verdicts(t, plain, wrapped, doc)
			if want == nil {
				assert.NoError(t, got, "schema %d, %s", i, doc)
				continue
			}
			require.Error(t, got, "schema %d, %s: %v", i, doc, want)
			assert.Equal(t, want.Error(), got.Error(), "schema %d, %s", i, doc)
		}
	}
}

// verdicts validates doc, decoded as a plugin's document is, with plain
// and with wrapped; a document the decoder refuses passes both.
func verdicts(t *testing.T, plain, wrapped *Schema, doc string) (want, got error) {
	v, err := DecodeUntrusted([]byte(doc), "")
	if err != nil {
		return nil, nil
	}
	return plain.validate(v, ""), wrapped.validate(v, "")
}

// FuzzNestingSameVerdicts is TestNestingSameVerdicts on generated
// documents.
func FuzzNestingSameVerdicts(f *testing.F) {
	for _, doc := range sameDocs {
		f.Add(doc)
	}
	var pairs [][2]*Schema
	for i, raw := range sameSchemas {
		wrapped, err := Compile(json.RawMessage(raw), fmt.Sprint("s", i))
		require.NoError(f, err)
		root, err := compileRoot(json.RawMessage(raw), fmt.Sprint("s", i))
		require.NoError(f, err)
		pairs = append(pairs, [2]*Schema{{name: wrapped.name, s: root}, wrapped})
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for i, p := range pairs {
			want, got := verdicts(t, p[0], p[1], doc)
			if want == nil || got == nil {
				require.Equal(t, want == nil, got == nil, "schema %d: %v / %v", i, want, got)
				continue
			}
			require.Equal(t, want.Error(), got.Error(), "schema %d", i)
		}
	})
}
