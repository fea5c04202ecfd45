package statepatch

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

// FuzzApply checks Doc against the plain RFC 6902 oracle: same verdict, same
// resulting document, an index that matches a fresh parse, and on error an
// unchanged document.
func FuzzApply(f *testing.F) {
	f.Add(`{"messages":[]}`, `[{"op":"add","path":"/messages/-","value":{"role":"user"}}]`)
	f.Add(`{"a":{"b":[1,2,3]},"c":"]"}`, `[{"op":"remove","path":"/a/b/1"},{"op":"add","path":"/a/b/0","value":[]},{"op":"replace","path":"/c","value":null}]`)
	f.Add(`[ 1 , {"x~y":2} ]`, `[{"op":"add","path":"/1/x~0y","value":3},{"op":"add","path":"/-","value":"\"]"}]`)
	f.Add(`{"a/b":1}`, `[{"op":"remove","path":"/a~1b"},{"op":"add","path":"","value":[]}]`)
	f.Add(`{"a":1}`, `[{"op":"add","path":"/a/b","value":1}]`)
	f.Add(`{}`, `[{"op":"add","path":"/","value":1},{"op":"add","path":"//","value":2}]`)
	f.Fuzz(func(t *testing.T, doc, patch string) {
		d, err := Parse([]byte(doc))
		if err != nil || hasDuplicateKeys([]byte(doc)) {
			return
		}
		var o []abi.PatchOp
		if json.Unmarshal([]byte(patch), &o) != nil {
			return
		}
		for _, op := range o {
			if hasDuplicateKeys(op.Value) {
				return
			}
		}
		held := d.Bytes() // what a session would hold
		before := string(held)
		root, err := decode([]byte(doc))
		require.NoError(t, err, "Parse accepted %q but the decoder refuses it", doc)
		want, refErr := refApply(root, o)
		err = d.Apply(o, nil)
		require.Equal(t, refErr == nil, err == nil, "Apply error %v, oracle error %v", err, refErr)
		require.Equal(t, before, string(held), "Apply wrote into bytes the Doc had returned")
		if err != nil {
			require.Equal(t, before, string(d.Bytes()), "failed Apply changed the document")
			return
		}
		wantJSON, err := json.Marshal(want)
		require.NoError(t, err)
		require.True(t, sameJSON(d.Bytes(), wantJSON), "Apply gave %s, oracle %s", d.Bytes(), wantJSON)
		assertIndexConsistent(t, d)
	})
}

// FuzzParsePointer checks that parsing never panics and that a parsed
// pointer formats back to one that parses to the same tokens.
func FuzzParsePointer(f *testing.F) {
	for _, s := range []string{"", "/", "/a/b", "/~0~1", "/~", "x", "/-", "/0/01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tokens, err := ParsePointer(p)
		if err != nil {
			return
		}
		again, err := ParsePointer(FormatPointer(tokens))
		require.NoError(t, err, "round trip of %q", p)
		require.Len(t, again, len(tokens), "round trip of %q", p)
		for i := range tokens {
			require.Equal(t, tokens[i], again[i], "round trip of %q: token %d", p, i)
		}
	})
}

// FuzzLocalValidation checks that validating only what a patch changed
// accepts exactly the patches after which the whole document validates,
// for schemas with and without keywords that force full validation.
func FuzzLocalValidation(f *testing.F) {
	srcs := []string{
		stateSchema,
		`{"type":"object","properties":{"m":{"type":"array","maxItems":3,"items":{"type":"integer","maximum":5}}},"additionalProperties":{"type":"string"}}`,
		`{"type":"object","patternProperties":{"^a":{"type":"array","uniqueItems":true}},"required":["a"],"minProperties":1}`,
		`{"$defs":{"n":{"type":["integer","array"],"items":{"$ref":"#/$defs/n"}}},"type":"object","additionalProperties":{"$ref":"#/$defs/n"}}`,
		`{"type":"object","properties":{"x":{"anyOf":[{"type":"array","items":{"type":"string"}},{"type":"array","items":{"type":"integer"}}]}}}`,
	}
	var compiled []*schema.Schema
	for i, src := range srcs {
		s, err := schema.Compile(json.RawMessage(src), fmt.Sprintf("fuzz%d", i))
		require.NoError(f, err)
		compiled = append(compiled, s)
	}
	f.Add(uint8(0), `{"messages":[]}`, `[{"op":"add","path":"/messages/-","value":{"role":"user","contents":[]}}]`)
	f.Add(uint8(1), `{"m":[1,2],"s":"x"}`, `[{"op":"add","path":"/m/-","value":5},{"op":"add","path":"/m/0","value":6}]`)
	f.Add(uint8(2), `{"a":[1,2],"ab":[]}`, `[{"op":"add","path":"/a/-","value":1},{"op":"remove","path":"/a"}]`)
	f.Add(uint8(3), `{"k":[1,[2,[3]]]}`, `[{"op":"add","path":"/k/1/1/-","value":[4,"x"]}]`)
	f.Add(uint8(4), `{"x":["a"]}`, `[{"op":"add","path":"/x/-","value":1}]`)
	f.Fuzz(func(t *testing.T, which uint8, doc, patch string) {
		s := compiled[int(which)%len(compiled)]
		if s.Validate(json.RawMessage(doc)) != nil || hasDuplicateKeys([]byte(doc)) {
			return // a patch starts from a valid state
		}
		var o []abi.PatchOp
		if json.Unmarshal([]byte(patch), &o) != nil {
			return
		}
		for _, op := range o {
			if hasDuplicateKeys(op.Value) {
				return
			}
		}
		plain, err := Parse([]byte(doc))
		require.NoError(t, err, "schema-valid document does not parse")
		if plain.Apply(o, nil) != nil {
			return
		}
		wantValid := s.Validate(plain.Bytes()) == nil
		d, _ := Parse([]byte(doc))
		err = d.Apply(o, s)
		require.Equal(t, wantValid, err == nil, "incremental verdict %v; patched: %s", err, plain.Bytes())
		if err != nil {
			require.Equal(t, doc, string(d.Bytes()), "refused patch changed the document")
		}
	})
}
