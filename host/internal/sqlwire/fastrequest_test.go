package sqlwire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// The request structs of the backends: sqlcap's reads write, pgcap's has
// no such field.
type withWriteRequest struct {
	Statements []WireStatement `json:"statements"`
	Write      bool            `json:"write"`
}

type noWriteRequest struct {
	Statements []WireStatement `json:"statements"`
}

var fastRequestCases = []struct {
	name string
	req  string
	fast bool // decodeRequestFast decodes it itself (both shapes)
}{
	{"plain", `{"statements":[{"sql":"SELECT ?","args":[1,-2.5,"a",null,true,false,{"blob":"AQI="}],"json_columns":["m"]}],"write":true}`, true},
	{"spaces everywhere", " {\n\"statements\" : [ { \"sql\" : \"x\" , \"args\" : [ 1 , [ 2 , { \"a\" : 3 } ] ] } ] , \"write\" : false }\t", true},
	{"escapes in strings", `{"statements":[{"sql":"a\"b\\c\/\b\f\n\r\t\u00e9\u4e2d","args":["{\"role\":\"user\"}"],"json_columns":["x\ty"]}]}`, true},
	{"utf-8", `{"statements":[{"sql":"SELECT 'é中😀'","args":["é"]}]}`, true},
	{"no statements", `{}`, true},
	{"empty statements", `{"statements":[]}`, true},
	{"empty statement", `{"statements":[{}]}`, true},
	{"empty args and columns", `{"statements":[{"sql":"x","args":[],"json_columns":[]}]}`, true},
	{"invalid utf-8 in an argument, kept as encoding/json keeps it", "{\"statements\":[{\"sql\":\"x\",\"args\":[\"a\xffb\"]}]}", true},
	{"numbers", `{"statements":[{"sql":"x","args":[0,-0,1e5,1E+5,1.5e-3,123456789012345678901234567890]}]}`, true},

	{"key in another case", `{"Statements":[{"sql":"x"}]}`, false},
	{"sql key in another case", `{"statements":[{"SQL":"x"}]}`, false},
	{"unknown member", `{"statements":[{"sql":"x"}],"other":1}`, false},
	{"unknown statement member", `{"statements":[{"sql":"x","arg":[1]}]}`, false},
	{"duplicate statements", `{"statements":[{"sql":"x"}],"statements":[{"sql":"y"}]}`, false},
	{"duplicate sql", `{"statements":[{"sql":"x","sql":"y"}]}`, false},
	{"duplicate args", `{"statements":[{"sql":"x","args":[1],"args":[2]}]}`, false},
	{"escaped key, the same key decoded", `{"statements":[{"s\u0071l":"x"}]}`, true},
	{"null statements", `{"statements":null}`, false},
	{"null statement", `{"statements":[null]}`, false},
	{"null sql", `{"statements":[{"sql":null}]}`, false},
	{"null args", `{"statements":[{"sql":"x","args":null}]}`, false},
	{"null column", `{"statements":[{"sql":"x","json_columns":[null]}]}`, false},
	{"sql not a string", `{"statements":[{"sql":1}]}`, false},
	{"statements not an array", `{"statements":{"sql":"x"}}`, false},
	{"args not an array", `{"statements":[{"sql":"x","args":1}]}`, false},
	{"column not a string", `{"statements":[{"sql":"x","json_columns":[1]}]}`, false},
	{"escaped surrogate pair", `{"statements":[{"sql":"\ud83d\ude00"}]}`, true},
	{"lone surrogate, replaced", `{"statements":[{"sql":"\ud83d"}]}`, true},
	{"invalid utf-8 in sql, replaced", "{\"statements\":[{\"sql\":\"a\xffb\"}]}", true},
	{"control character", "{\"statements\":[{\"sql\":\"a\nb\"}]}", false},
	{"bad escape", `{"statements":[{"sql":"\x"}]}`, false},
	{"bad escape in an argument", `{"statements":[{"sql":"x","args":["\x"]}]}`, false},
	{"short unicode escape", `{"statements":[{"sql":"x","args":["\u12"]}]}`, false},
	{"leading zero", `{"statements":[{"sql":"x","args":[01]}]}`, false},
	{"bare minus", `{"statements":[{"sql":"x","args":[-]}]}`, false},
	{"dot without digits", `{"statements":[{"sql":"x","args":[1.]}]}`, false},
	{"exponent without digits", `{"statements":[{"sql":"x","args":[1e]}]}`, false},
	{"trailing comma", `{"statements":[{"sql":"x","args":[1,]}]}`, false},
	{"missing comma", `{"statements":[{"sql":"x" "args":[1]}]}`, false},
	{"trailing data", `{"statements":[]}x`, false},
	{"two values", `{} {}`, false},
	{"not an object", `[]`, false},
	{"empty", ``, false},
	{"truncated", `{"statements":[{"sql":"x"`, false},
	{"truncated string", `{"statements":[{"sql":"x`, false},
	{"bad literal", `{"statements":[{"sql":"x","args":[nul]}]}`, false},
	{"deep argument", `{"statements":[{"sql":"x","args":[` + deep(guestjson.MaxDepth) + `]}]}`, false},
}

func deep(n int) string {
	s := "1"
	for range n {
		s = "[" + s + "]"
	}
	return s
}

// TestDecodeRequestFast checks that the one-pass decoder takes the
// requests it should and leaves the others to encoding/json, and that
// whatever it takes it decodes as encoding/json does.
func TestDecodeRequestFast(t *testing.T) {
	for _, tc := range fastRequestCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, withWrite := range []bool{true, false} {
				_, _, ok := decodeRequestFast([]byte(tc.req), withWrite)
				assert.Equal(t, tc.fast, ok, "withWrite %v", withWrite)
				checkRequestFast(t, []byte(tc.req))
			}
		})
	}
}

// TestDecodeRequestFastWrite checks the write member: read by a backend
// whose request has it, ignored whatever it holds by one whose has not.
func TestDecodeRequestFastWrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		req       string
		withWrite bool
		fast      bool
	}{
		{"write true", `{"write":true,"statements":[]}`, true, true},
		{"write false", `{"write":false}`, true, true},
		{"write a number", `{"write":1}`, true, false},
		{"write null", `{"write":null}`, true, false},
		{"write twice", `{"write":true,"write":false}`, true, false},
		{"write ignored", `{"write":{"a":[1,"b"]},"statements":[]}`, false, true},
		{"write ignored twice", `{"write":1,"write":true}`, false, true},
		{"write ignored, but invalid", `{"write":[1,]}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, ok := decodeRequestFast([]byte(tc.req), tc.withWrite)
			assert.Equal(t, tc.fast, ok)
			checkRequestFast(t, []byte(tc.req))
		})
	}
}

// TestDecodeRequestErrors checks that a request left to encoding/json
// fails with the error it always had, naming the backend's type.
func TestDecodeRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, req, want string
	}{
		{"sql not a string", `{"statements":[{"sql":1}]}`, "sql: decode request: json: cannot unmarshal number into Go struct field .statements.sql of type string"},
		{"syntax", `{"statements":[}`, "sql: decode request: invalid character '}' looking for beginning of value"},
		{"write a string", `{"write":"yes"}`, "sql: decode request: json: cannot unmarshal string into Go struct field withWriteRequest.write of type bool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req withWriteRequest
			err := DecodeRequest([]byte(tc.req), &req, &req.Statements, &req.Write)
			require.NotNil(t, err)
			assert.Equal(t, tc.want, err.Message)
		})
	}
}

// checkRequestFast decodes req both ways, in both request shapes, and
// fails unless decodeRequestFast refuses it or decodes it as
// encoding/json does; then the same for DecodeRequest and the string
// arguments' DecodeArg.
func checkRequestFast(t *testing.T, req []byte) {
	t.Helper()
	for _, withWrite := range []bool{true, false} {
		sts, write, ok := decodeRequestFast(req, withWrite)
		var want withWriteRequest
		var err error
		if withWrite {
			err = json.Unmarshal(req, &want)
		} else {
			var nw noWriteRequest
			err = json.Unmarshal(req, &nw)
			want.Statements = nw.Statements
		}
		if !ok {
			continue
		}
		require.NoError(t, err, "decodeRequestFast accepted what encoding/json refuses: %q", req)
		require.Equal(t, want.Statements, sts, "%q", req)
		require.Equal(t, want.Write, write, "%q", req)

		var got withWriteRequest
		if withWrite {
			require.Nil(t, DecodeRequest(req, &got, &got.Statements, &got.Write))
		} else {
			var nw noWriteRequest
			require.Nil(t, DecodeRequest(req, &nw, &nw.Statements, nil))
			got.Statements = nw.Statements
		}
		require.Equal(t, want, got)
		for _, st := range sts {
			for _, a := range st.Args {
				checkArg(t, a)
			}
		}
	}
}

// checkArg fails unless DecodeArg decodes a as the old DecodeArg did (a
// string through encoding/json).
func checkArg(t *testing.T, a json.RawMessage) {
	t.Helper()
	if len(a) == 0 || a[0] != '"' {
		return
	}
	got, gotErr := DecodeArg(a)
	var want string
	wantErr := json.Unmarshal(bytes.TrimSpace(a), &want)
	require.Equal(t, wantErr, gotErr, "%q", a)
	require.Equal(t, want, got, "%q", a)
}

// TestDecodeStringArg checks the string argument decoder against
// encoding/json.
func TestDecodeStringArg(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"plain", `"abc"`, true},
		{"escapes", `"a\"\\\/\b\f\n\r\t\u0041\u00e9b"`, true},
		{"utf-8", `"é中😀"`, true},
		{"empty", `""`, true},
		{"surrogate pair", `"\ud83d\ude00"`, true},
		{"lone surrogate", `"\ud83d"`, true},
		{"invalid utf-8", "\"a\xff\"", true},
		{"unterminated", `"abc`, false},
		{"unterminated after an escape", `"a\n`, false},
		{"control", "\"a\tb\"", false},
		{"bad escape", `"\q"`, false},
		{"bad hex", `"\u00g0"`, false},
		{"two values", `"a" "b"`, false},
		{"not a string", `1`, false},
		{"null", `null`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := decodeStringArg([]byte(tc.in))
			require.Equal(t, tc.ok, ok)
			var want string
			err := json.Unmarshal([]byte(tc.in), &want)
			if ok {
				require.NoError(t, err)
				assert.Equal(t, want, s)
			}
			checkArg(t, []byte(tc.in))
		})
	}
}

// FuzzDecodeRequestFast feeds requests to both decoders: decodeRequestFast
// must refuse what encoding/json refuses and decode the rest to the same
// value, and DecodeArg must decode each string argument as encoding/json.
func FuzzDecodeRequestFast(f *testing.F) {
	for _, tc := range fastRequestCases {
		f.Add([]byte(tc.req))
	}
	f.Add([]byte(`{"write":true,"statements":[{"sql":"INSERT INTO m VALUES (?, ?)","args":["{\"role\":\"user\",\"contents\":[{\"type\":\"text\",\"text\":\"hi\\n\"}]}", 7]}]}`))
	f.Fuzz(func(t *testing.T, req []byte) {
		checkRequestFast(t, req)
		if got, ok := decodeStringArg(req); ok {
			var want string
			require.NoError(t, json.Unmarshal(req, &want), "%q", req)
			require.Equal(t, want, got, "%q", req)
		}
		checkArg(t, req)
	})
}
