package statepatch

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

func ops(t testing.TB, s string) []abi.PatchOp {
	t.Helper()
	var o []abi.PatchOp
	require.NoError(t, json.Unmarshal([]byte(s), &o))
	return o
}

func TestApply(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		ops  string
		want string // exact bytes
	}{
		{"append to empty array", `{"messages":[]}`, `[{"op":"add","path":"/messages/-","value":{"a":1}}]`, `{"messages":[{"a":1}]}`},
		{"append to empty array with space", `{"messages":[ ]}`, `[{"op":"add","path":"/messages/-","value":1}]`, `{"messages":[ 1]}`},
		{"append several", `{"messages":[1]}`, `[{"op":"add","path":"/messages/-","value":2},{"op":"add","path":"/messages/-","value":3}]`, `{"messages":[1,2,3]}`},
		{"append at explicit end", `{"m":[1]}`, `[{"op":"add","path":"/m/1","value":2}]`, `{"m":[1,2]}`},
		{"insert at front", `{"m":[1,2]}`, `[{"op":"add","path":"/m/0","value":0}]`, `{"m":[0,1,2]}`},
		{"insert in middle", `{"m":[1,3]}`, `[{"op":"add","path":"/m/1","value":2}]`, `{"m":[1,2,3]}`},
		{"add new member", `{"a":1}`, `[{"op":"add","path":"/b","value":[2]}]`, `{"a":1,"b":[2]}`},
		{"add member to empty object", `{}`, `[{"op":"add","path":"/b","value":"x"}]`, `{"b":"x"}`},
		{"add replaces existing member", `{"a":1,"b":2}`, `[{"op":"add","path":"/a","value":10}]`, `{"a":10,"b":2}`},
		{"replace member", `{"a":1,"b":2}`, `[{"op":"replace","path":"/b","value":{"c":3}}]`, `{"a":1,"b":{"c":3}}`},
		{"replace element", `[1,2,3]`, `[{"op":"replace","path":"/1","value":"two"}]`, `[1,"two",3]`},
		{"remove only member", `{ "a" : 1 }`, `[{"op":"remove","path":"/a"}]`, `{  }`},
		{"remove first member", `{"a":1, "b":2}`, `[{"op":"remove","path":"/a"}]`, `{"b":2}`},
		{"remove last member", `{"a":1, "b":2}`, `[{"op":"remove","path":"/b"}]`, `{"a":1}`},
		{"remove middle element", `[1, 2, 3]`, `[{"op":"remove","path":"/1"}]`, `[1, 3]`},
		{"replace root", `{"a":1}`, `[{"op":"replace","path":"","value":[1]}]`, `[1]`},
		{"add root", ` {"a":1} `, `[{"op":"add","path":"","value":2}]`, ` 2 `},
		{"escaped pointer", `{"a/b":{"~":1}}`, `[{"op":"replace","path":"/a~1b/~0","value":2}]`, `{"a/b":{"~":2}}`},
		{"new key needing escapes", `{}`, `[{"op":"add","path":"/q\"\\\n","value":1}]`, `{"q\"\\\n":1}`},
		{"escaped key in document", `{"\u0061":1}`, `[{"op":"replace","path":"/a","value":2}]`, `{"\u0061":2}`},
		{"deep edit then sibling edit", `{"x":{"y":[1]},"z":[{"k":"v"}]}`,
			`[{"op":"add","path":"/x/y/-","value":2},{"op":"add","path":"/z/0/k2","value":true},{"op":"replace","path":"/x/y/0","value":0}]`,
			`{"x":{"y":[0,2]},"z":[{"k":"v","k2":true}]}`},
		{"value whitespace trimmed", `[]`, `[{"op":"add","path":"/-","value":  {"a" : 1}  }]`, `[{"a" : 1}]`},
		{"strings with brackets and escapes", `{"s":"]}\"[{","m":["\\\"]"]}`, `[{"op":"add","path":"/m/-","value":"x"}]`, `{"s":"]}\"[{","m":["\\\"]","x"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.doc))
			require.NoError(t, err)
			o := ops(t, tt.ops)
			require.NoError(t, d.Apply(o, nil), "Apply")
			require.Equal(t, tt.want, string(d.Bytes()))
			// The index the edits left behind must agree with a fresh one.
			assertIndexConsistent(t, d)
		})
	}
}

// assertIndexConsistent compares every indexed span of d with a freshly
// parsed copy.
func assertIndexConsistent(t testing.TB, d *Doc) {
	t.Helper()
	fresh, err := Parse(d.Bytes())
	require.NoError(t, err, "patched document is not JSON:\n%s", d.Bytes())
	var check func(n *node, abs int, path string)
	check = func(n *node, abs int, path string) {
		if !n.indexed {
			return
		}
		got := d.buf[abs : abs+n.size]
		require.True(t, json.Valid(got), "index of %q spans %q, not a JSON value", path, got)
		var f *node
		ff, err := fresh.walk(mustTokens(t, path))
		require.NoError(t, err, "fresh walk %q", path)
		f = ff[len(ff)-1].n
		require.NoError(t, fresh.index(f, ff[len(ff)-1].abs))
		require.Len(t, n.kids, len(f.kids), "%q: children indexed, against a fresh index", path)
		for i := range n.kids {
			k, fk := n.kids[i], f.kids[i]
			require.Equal(t, []any{fk.key, fk.koff, fk.off, fk.size, fk.kind}, []any{k.key, k.koff, k.off, k.size, k.kind},
				"%q child %d: key, koff, off, size, kind against a fresh index", path, i)
			tok := k.key
			if n.kind == '[' {
				tok = fmt.Sprint(i)
			}
			check(&n.kids[i], abs+k.off, path+"/"+escapeToken(tok))
		}
	}
	check(&d.root, d.root.off, "")
}

func mustTokens(t testing.TB, p string) []string {
	t.Helper()
	tok, err := ParsePointer(p)
	require.NoError(t, err)
	return tok
}

func TestApplyErrorsLeaveDocUnchanged(t *testing.T) {
	const doc = `{"messages":[{"role":"user"}],"n":1,"s":"x"}`
	tests := []struct {
		name string
		ops  string
		want string // substring of the error
	}{
		{"unknown op", `[{"op":"move","path":"/n"}]`, `unknown op "move"`},
		{"missing value", `[{"op":"add","path":"/x"}]`, "needs a value"},
		{"value not json", `[{"op":"add","path":"/x","value":1}]`, ""}, // replaced below
		{"bad pointer", `[{"op":"add","path":"x","value":1}]`, "does not start with '/'"},
		{"bad escape", `[{"op":"add","path":"/a~2","value":1}]`, "'~' must be followed by 0 or 1"},
		{"missing parent", `[{"op":"add","path":"/nope/x","value":1}]`, `"/nope" not found`},
		{"replace missing", `[{"op":"replace","path":"/nope","value":1}]`, `"/nope" not found`},
		{"remove missing", `[{"op":"remove","path":"/nope"}]`, `"/nope" not found`},
		{"remove root", `[{"op":"remove","path":""}]`, "cannot remove the whole document"},
		{"index past end", `[{"op":"add","path":"/messages/2","value":1}]`, "out of range"},
		{"replace past end", `[{"op":"replace","path":"/messages/1","value":1}]`, "out of range"},
		{"leading zero index", `[{"op":"add","path":"/messages/01","value":1}]`, "not an array index"},
		{"dash not for replace", `[{"op":"replace","path":"/messages/-","value":1}]`, "can only be added to"},
		{"into scalar", `[{"op":"add","path":"/n/x","value":1}]`, "is not an object or array"},
		{"through scalar", `[{"op":"add","path":"/s/x/y","value":1}]`, "is not an object or array"},
		{"second op fails after first applied", `[{"op":"add","path":"/messages/-","value":{"role":"assistant"}},{"op":"remove","path":"/nope"}]`, `op 1 (remove "/nope")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(doc))
			require.NoError(t, err)
			o := ops(t, tt.ops)
			if tt.name == "value not json" {
				o[0].Value = json.RawMessage(`{"a":`)
				tt.want = "value is not valid JSON"
			}
			err = d.Apply(o, nil)
			require.ErrorIs(t, err, ErrPatch)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, doc, string(d.Bytes()), "document changed by a failed patch")
			// And the Doc still works.
			require.NoError(t, d.Apply(ops(t, `[{"op":"add","path":"/messages/-","value":2}]`), nil))
			assertIndexConsistent(t, d)
		})
	}
}

func TestParseRefusesWhatIsNotJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1}x`, `[1,]`, `{"a" 1}`} {
		_, err := Parse([]byte(in))
		assert.ErrorIs(t, err, ErrDocument, "Parse(%q)", in)
	}
}

func TestDuplicateMembersRefusedOnPath(t *testing.T) {
	for _, doc := range []string{`{"a":1,"a":2}`, `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k3":0}`} {
		d, err := Parse([]byte(doc))
		require.NoError(t, err)
		err = d.Apply(ops(t, `[{"op":"add","path":"/b","value":1}]`), nil)
		require.ErrorIs(t, err, ErrDocument, "Apply on %s", doc)
		require.ErrorContains(t, err, "duplicate member", "Apply on %s", doc)
	}
}

func TestElements(t *testing.T) {
	d, err := Parse([]byte(`{"h":{"messages":[ {"a":1} , "two",[3] ]},"x":[]}`))
	require.NoError(t, err)
	got, err := d.Elements("/h/messages")
	require.NoError(t, err)
	want := []string{`{"a":1}`, `"two"`, `[3]`}
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i], string(got[i]), "element %d", i)
		assert.Equal(t, len(got[i]), cap(got[i]), "element %d can be appended into the document", i)
	}
	e, err := d.Elements("/x")
	require.NoError(t, err)
	require.Empty(t, e)
	_, err = d.Elements("/h")
	require.ErrorIs(t, err, ErrPatch, "Elements of an object")
	_, err = d.Elements("/nope")
	require.ErrorIs(t, err, ErrPatch, "Elements of a missing path")
	// After an append the index serves the new element too.
	require.NoError(t, d.Apply(ops(t, `[{"op":"add","path":"/h/messages/-","value":4}]`), nil))
	got, err = d.Elements("/h/messages")
	require.NoError(t, err)
	require.Len(t, got, 4, "after append")
	require.Equal(t, "4", string(got[3]), "after append")
	v, err := d.Get("/h/messages/0/a")
	require.NoError(t, err)
	require.Equal(t, "1", string(v))
}

// TestElementRange: a range is the elements it names, clamped to the
// array, with the array's length; after an append it sees the new element.
func TestElementRange(t *testing.T) {
	d, err := Parse([]byte(`{"m":[0,1,2,3,4],"n":null}`))
	require.NoError(t, err)
	tests := []struct {
		from, to int
		want     []string
	}{
		{0, 2, []string{"0", "1"}},
		{3, 10, []string{"3", "4"}},
		{2, -1, []string{"2", "3", "4"}},
		{5, 7, []string{}},
		{9, 12, []string{}},
		{-3, 1, []string{"0"}},
	}
	for _, tt := range tests {
		got, n, err := d.ElementRange("/m", tt.from, tt.to)
		require.NoError(t, err)
		require.Equal(t, 5, n)
		s := []string{}
		for _, g := range got {
			s = append(s, string(g))
		}
		require.Equal(t, tt.want, s, "range %d..%d", tt.from, tt.to)
	}
	got, n, err := d.ElementRange("/n", 0, 10)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Zero(t, n)
	_, _, err = d.ElementRange("/missing", 0, 10)
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, d.Apply(ops(t, `[{"op":"add","path":"/m/-","value":5}]`), nil))
	got, n, err = d.ElementRange("/m", 4, 100)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	require.Len(t, got, 2)
	require.Equal(t, "5", string(got[1]))
}

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"/", []string{""}, true},
		{"/a/b", []string{"a", "b"}, true},
		{"/a~1b/~0c/~01", []string{"a/b", "~c", "~1"}, true},
		{"/ /%", []string{" ", "%"}, true},
		{"a", nil, false},
		{"/~", nil, false},
		{"/~2", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePointer(tt.in)
			if !tt.ok {
				require.ErrorIs(t, err, ErrPointer)
				return
			}
			require.NoError(t, err)
			require.Len(t, got, len(tt.want))
			require.Equal(t, fmt.Sprintf("%q", tt.want), fmt.Sprintf("%q", got))
			if tt.in != "/a~1b/~0c/~01" {
				require.Equal(t, tt.in, FormatPointer(got))
			}
		})
	}
}

const stateSchema = `{
	"type": "object",
	"required": ["messages"],
	"properties": {
		"messages": {"type": "array", "items": {"$ref": "https://wasmhist.dev/schemas/v1/message.json"}},
		"meta": {"type": "object", "additionalProperties": {"type": "integer"}}
	}
}`

func TestApplyValidatesOnlyWhatChanged(t *testing.T) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	require.NoError(t, err)
	const doc = `{"messages":[{"role":"user","contents":[]}],"meta":{}}`
	tests := []struct {
		name  string
		ops   string
		valid bool
		at    string // instance location of the first problem
	}{
		{"valid append", `[{"op":"add","path":"/messages/-","value":{"role":"assistant","contents":[{"type":"text","text":"hi"}]}}]`, true, ""},
		{"invalid append says where", `[{"op":"add","path":"/messages/-","value":{"role":"robot","contents":[]}}]`, false, "/messages/1/role"},
		{"invalid nested content", `[{"op":"add","path":"/messages/0/contents/-","value":{"type":"function_call"}}]`, false, "/messages/0/contents/0"},
		{"valid meta member", `[{"op":"add","path":"/meta/n","value":3}]`, true, ""},
		{"invalid meta member", `[{"op":"add","path":"/meta/n","value":"3"}]`, false, "/meta/n"},
		{"remove required falls back to full validation", `[{"op":"remove","path":"/messages"}]`, false, ""},
		{"replace message", `[{"op":"replace","path":"/messages/0","value":{"role":"tool","contents":[]}}]`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(doc))
			require.NoError(t, err)
			err = d.Apply(ops(t, tt.ops), s)
			if tt.valid {
				require.NoError(t, err)
				return
			}
			var ve *schema.ValidationError
			require.ErrorAs(t, err, &ve)
			require.ErrorIs(t, err, schema.ErrInvalid)
			require.Equal(t, tt.at, ve.Problems[0].InstanceLocation, "problem location (%v)", err)
			require.Equal(t, doc, string(d.Bytes()), "document changed by an invalid patch")
		})
	}
}

// TestLocalValidationAgreesWithFull checks, over schemas that allow and that
// forbid local checks, that validating only what a patch changed accepts
// exactly the patches that leave the whole document valid.
func TestLocalValidationAgreesWithFull(t *testing.T) {
	schemasUnderTest := map[string]string{
		"items":       stateSchema,
		"maxItems":    `{"type":"object","properties":{"messages":{"type":"array","maxItems":2,"items":{"type":"integer"}}}}`,
		"uniqueItems": `{"type":"object","properties":{"messages":{"type":"array","uniqueItems":true}}}`,
		"contains":    `{"type":"object","properties":{"messages":{"type":"array","contains":{"const":1},"maxContains":1}}}`,
		"oneOf":       `{"type":"object","oneOf":[{"properties":{"messages":{"maxItems":1}}},{"required":["meta"]}]}`,
		"enum root":   `{"enum":[{"messages":[1]},{"messages":[1,1]}]}`,
		"pattern":     `{"type":"object","patternProperties":{"^m":{"type":"array","items":{"type":"integer"}}},"additionalProperties":false}`,
		"minItems":    `{"type":"object","properties":{"messages":{"type":"array","minItems":1}}}`,
		"prefixItems": `{"type":"object","properties":{"messages":{"type":"array","prefixItems":[{"const":1}],"items":{"type":"integer"}}}}`,
		"ref chain":   `{"$ref":"#/$defs/root","$defs":{"root":{"type":"object","properties":{"messages":{"$ref":"#/$defs/list"}}},"list":{"type":"array","items":{"$ref":"#/$defs/int"}},"int":{"type":"integer","maximum":5}}}`,
		"dependent":   `{"type":"object","dependentRequired":{"meta":["messages"]}}`,
	}
	docs := []string{`{"messages":[1]}`, `{"messages":[1],"meta":{}}`, `{"messages":[]}`}
	patches := []string{
		`[{"op":"add","path":"/messages/-","value":1}]`,
		`[{"op":"add","path":"/messages/-","value":2}]`,
		`[{"op":"add","path":"/messages/-","value":9}]`,
		`[{"op":"add","path":"/messages/-","value":"x"}]`,
		`[{"op":"add","path":"/messages/0","value":1}]`,
		`[{"op":"replace","path":"/messages/0","value":2}]`,
		`[{"op":"remove","path":"/messages/0"}]`,
		`[{"op":"remove","path":"/messages"}]`,
		`[{"op":"add","path":"/meta","value":{}}]`,
		`[{"op":"add","path":"/mx","value":[1]}]`,
		`[{"op":"add","path":"/messages/-","value":1},{"op":"add","path":"/messages/-","value":1}]`,
	}
	for name, src := range schemasUnderTest {
		s, err := schema.Compile(json.RawMessage(src), name)
		require.NoError(t, err, name)
		for _, doc := range docs {
			if s.Validate(json.RawMessage(doc)) != nil {
				continue // the premise of a patch is a valid state
			}
			for _, p := range patches {
				t.Run(name+" "+doc+" "+p, func(t *testing.T) {
					o := ops(t, p)
					d, err := Parse([]byte(doc))
					require.NoError(t, err)
					plain, _ := Parse([]byte(doc))
					if plain.Apply(o, nil) != nil {
						return // not applicable regardless of schema
					}
					wantValid := s.Validate(plain.Bytes()) == nil
					err = d.Apply(o, s)
					require.Equal(t, wantValid, err == nil, "incremental verdict %v (patched: %s)", err, plain.Bytes())
				})
			}
		}
	}
}

// TestApplyRefusesValuesThatAreNotJSON: a value's JSON is checked once,
// by the local schema check's decoding where one applies and by json.Valid
// elsewhere; either way a value that is not JSON is refused and the
// document is left as it was.
func TestApplyRefusesValuesThatAreNotJSON(t *testing.T) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	require.NoError(t, err)
	const doc = `{"messages":[{"role":"user","contents":[]}],"meta":{}}`
	for _, tc := range []struct {
		name, op, path string
		value          string
		s              *schema.Schema
	}{
		{"local check decodes", "add", "/messages/-", `{"role":"user","contents":[]`, s},
		{"local check, data after the value", "add", "/messages/-", `{"role":"user","contents":[]} {}`, s},
		{"local check, number", "add", "/meta/n", `01`, s},
		{"replace, local check", "replace", "/messages/0", `{"role":"user","contents":[}`, s},
		{"falls back to full validation", "add", "/other", `{"a":`, s},
		{"no schema", "add", "/messages/-", `[1,]`, nil},
		{"whole document", "replace", "", `{"messages":[]`, s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse([]byte(doc))
			require.NoError(t, err)
			err = d.Apply([]abi.PatchOp{{Op: tc.op, Path: tc.path, Value: json.RawMessage(tc.value)}}, tc.s)
			require.ErrorIs(t, err, ErrPatch)
			require.ErrorContains(t, err, "value is not valid JSON")
			require.Equal(t, doc, string(d.Bytes()), "document changed by a refused patch")
		})
	}
}
