package statepatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

func ops(t testing.TB, s string) []abi.PatchOp {
	t.Helper()
	var o []abi.PatchOp
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatal(err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			o := ops(t, tt.ops)
			if err := d.Apply(o, nil); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := string(d.Bytes()); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
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
	if err != nil {
		t.Fatalf("patched document is not JSON: %v\n%s", err, d.Bytes())
	}
	var check func(n *node, abs int, path string)
	check = func(n *node, abs int, path string) {
		if !n.indexed {
			return
		}
		got := d.buf[abs : abs+n.size]
		if !json.Valid(got) {
			t.Fatalf("index of %q spans %q, not a JSON value", path, got)
		}
		var f *node
		ff, err := fresh.walk(mustTokens(t, path))
		if err != nil {
			t.Fatalf("fresh walk %q: %v", path, err)
		}
		f = ff[len(ff)-1].n
		if err := fresh.index(f, ff[len(ff)-1].abs); err != nil {
			t.Fatal(err)
		}
		if len(f.kids) != len(n.kids) {
			t.Fatalf("%q: %d children indexed, fresh index has %d", path, len(n.kids), len(f.kids))
		}
		for i := range n.kids {
			k, fk := n.kids[i], f.kids[i]
			if k.key != fk.key || k.koff != fk.koff || k.off != fk.off || k.size != fk.size || k.kind != fk.kind {
				t.Fatalf("%q child %d: index %+v, fresh %+v", path, i, k, fk)
			}
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
	if err != nil {
		t.Fatal(err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			o := ops(t, tt.ops)
			if tt.name == "value not json" {
				o[0].Value = json.RawMessage(`{"a":`)
				tt.want = "value is not valid JSON"
			}
			err = d.Apply(o, nil)
			if !errors.Is(err, ErrPatch) {
				t.Fatalf("Apply = %v, want ErrPatch", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if got := string(d.Bytes()); got != doc {
				t.Fatalf("document changed by a failed patch:\n%s", got)
			}
			// And the Doc still works.
			if err := d.Apply(ops(t, `[{"op":"add","path":"/messages/-","value":2}]`), nil); err != nil {
				t.Fatal(err)
			}
			assertIndexConsistent(t, d)
		})
	}
}

func TestParseRefusesWhatIsNotJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1}x`, `[1,]`, `{"a" 1}`} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrDocument) {
			t.Errorf("Parse(%q) = %v, want ErrDocument", in, err)
		}
	}
}

func TestDuplicateMembersRefusedOnPath(t *testing.T) {
	for _, doc := range []string{`{"a":1,"a":2}`, `{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k3":0}`} {
		d, err := Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		err = d.Apply(ops(t, `[{"op":"add","path":"/b","value":1}]`), nil)
		if !errors.Is(err, ErrDocument) || !strings.Contains(err.Error(), "duplicate member") {
			t.Fatalf("Apply on %s = %v, want a duplicate member error", doc, err)
		}
	}
}

func TestElements(t *testing.T) {
	d, err := Parse([]byte(`{"h":{"messages":[ {"a":1} , "two",[3] ]},"x":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Elements("/h/messages")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"a":1}`, `"two"`, `[3]`}
	if len(got) != len(want) {
		t.Fatalf("got %d elements, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("element %d = %s, want %s", i, got[i], want[i])
		}
		if cap(got[i]) != len(got[i]) {
			t.Errorf("element %d can be appended into the document (cap %d > len %d)", i, cap(got[i]), len(got[i]))
		}
	}
	if e, err := d.Elements("/x"); err != nil || len(e) != 0 {
		t.Fatalf("Elements(/x) = %v, %v; want empty", e, err)
	}
	if _, err := d.Elements("/h"); !errors.Is(err, ErrPatch) {
		t.Fatalf("Elements of an object = %v, want ErrPatch", err)
	}
	if _, err := d.Elements("/nope"); !errors.Is(err, ErrPatch) {
		t.Fatalf("Elements of a missing path = %v, want ErrPatch", err)
	}
	// After an append the index serves the new element too.
	if err := d.Apply(ops(t, `[{"op":"add","path":"/h/messages/-","value":4}]`), nil); err != nil {
		t.Fatal(err)
	}
	got, _ = d.Elements("/h/messages")
	if len(got) != 4 || string(got[3]) != "4" {
		t.Fatalf("after append: %q", got)
	}
	v, err := d.Get("/h/messages/0/a")
	if err != nil || string(v) != "1" {
		t.Fatalf("Get = %s, %v", v, err)
	}
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
			if (err == nil) != tt.ok {
				t.Fatalf("ParsePointer(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if !tt.ok {
				if !errors.Is(err, ErrPointer) {
					t.Fatalf("error %v is not ErrPointer", err)
				}
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if back := FormatPointer(got); back != tt.in && tt.in != "/a~1b/~0c/~01" {
				t.Fatalf("FormatPointer = %q, want %q", back, tt.in)
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
	if err != nil {
		t.Fatal(err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			err = d.Apply(ops(t, tt.ops), s)
			if tt.valid {
				if err != nil {
					t.Fatalf("Apply = %v", err)
				}
				return
			}
			var ve *schema.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, schema.ErrInvalid) {
				t.Fatalf("Apply = %v, want a schema.ValidationError", err)
			}
			if ve.Problems[0].InstanceLocation != tt.at {
				t.Fatalf("problem at %q, want %q (%v)", ve.Problems[0].InstanceLocation, tt.at, err)
			}
			if string(d.Bytes()) != doc {
				t.Fatalf("document changed by an invalid patch: %s", d.Bytes())
			}
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
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, doc := range docs {
			if s.Validate(json.RawMessage(doc)) != nil {
				continue // the premise of a patch is a valid state
			}
			for _, p := range patches {
				t.Run(name+" "+doc+" "+p, func(t *testing.T) {
					o := ops(t, p)
					d, err := Parse([]byte(doc))
					if err != nil {
						t.Fatal(err)
					}
					plain, _ := Parse([]byte(doc))
					if plain.Apply(o, nil) != nil {
						return // not applicable regardless of schema
					}
					wantValid := s.Validate(plain.Bytes()) == nil
					err = d.Apply(o, s)
					if (err == nil) != wantValid {
						t.Fatalf("incremental verdict %v, full validation valid=%v (patched: %s)", err, wantValid, plain.Bytes())
					}
				})
			}
		}
	}
}
