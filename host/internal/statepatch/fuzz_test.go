package statepatch

import (
	"encoding/json"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
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
		before := string(d.Bytes())
		root, err := decode([]byte(doc))
		if err != nil {
			t.Fatalf("Parse accepted %q but the decoder refuses it: %v", doc, err)
		}
		want, refErr := refApply(root, o)
		err = d.Apply(o, nil)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("Apply error %v, oracle error %v", err, refErr)
		}
		if err != nil {
			if string(d.Bytes()) != before {
				t.Fatalf("failed Apply changed the document:\n%s\nto\n%s", before, d.Bytes())
			}
			return
		}
		wantJSON, _ := json.Marshal(want)
		if !sameJSON(d.Bytes(), wantJSON) {
			t.Fatalf("Apply gave %s, oracle %s", d.Bytes(), wantJSON)
		}
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
		if err != nil || len(again) != len(tokens) {
			t.Fatalf("round trip of %q: %q, %v", p, again, err)
		}
		for i := range tokens {
			if tokens[i] != again[i] {
				t.Fatalf("round trip of %q: token %d %q became %q", p, i, tokens[i], again[i])
			}
		}
	})
}
