package guestjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decoderSeeds are the documents the guest decoders met in their own
// fuzzers before they shared this package (sdk's requests, the inmemory
// plugin's config and state, sdk/sql's responses), with the shapes and
// mistakes that found bugs there. testdata/fuzz/FuzzDecoder holds the
// inputs fuzzing found.
var decoderSeeds = []string{
	``,
	` `,
	`{}`,
	`null`,
	`[]`,
	`true`,
	`-0`,
	`"\u00e9"`,
	`{"session":{"session_id":"s","state_key":"k","service_session_id":"c"},"state":{"messages":[]},"config":{"max_messages":3},"request_messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}],"response_messages":[]}`,
	`{"request_messages":[{"a":"\u00e9\n\"q\"","b":[1,-2.5e+3,true,false,null,{}]}], "x_future": {"deep": [[[]]]}}`,
	` { "session" : { "session_id" : "a\\b\u0041" } , "state" : null , "request_messages" : null } `,
	`{"request_messages":[{"k":"v"}],"request_messages":[{"k":"w"}]}`,
	`{"session":{"session_id":"\ud83d\ude00"}}`,
	`{"cursor":"\ud83d\u0041\udc00\ud800\ud800\ude00","from_version":null,"limit":null}`,
	`{"st\u0061te":1,"\u0000":2}`,
	`{"max_messages":3,"max_tokens":100}`,
	`{"max_tokens":99999999999999999999}`,
	` {"messages" : [ {"role":"user","contents":[{"type":"text","text":"a\"b\u00e9"}]} , 1 , null , "s" , [true,false] ] , "x":{"y":[]} } `,
	`{"results":[{"rows_affected":2,"last_insert_id":9},{"columns":["a","b"],"rows":[[1,"x\"]"],[{"blob":"AQI="},{"k":[1,{"n":"}"}]}],[null,-1.5e3]]}]}`,
	`{"results":[{"columns":["a"],"rows":[[1],["x"]]}]}`,
	`{"state":01}`,
	`{"state":1.}`,
	`{"state":-}`,
	`{"state":"\x"}`,
	`{"state":"a` + "\x01" + `"}`,
	`{"state":tru}`,
	`{"a":1,}`,
	`{"a" 1}`,
	`{"a":1} x`,
	`{"messages":[1]}` + "\x00",
	"\"bad \xff utf-8\"",
	`[1e400,-1E-400,0.0e0]`,
	strings.Repeat(`[`, MaxDepth) + strings.Repeat(`]`, MaxDepth),
	strings.Repeat(`[`, MaxDepth+1) + strings.Repeat(`]`, MaxDepth+1),
	`{"messages":[` + strings.Repeat(`{"a":`, 1500) + `1` + strings.Repeat(`}`, 1500) + `]}`,
}

func TestDecoderMatchesEncodingJSON(t *testing.T) {
	for _, seed := range decoderSeeds {
		t.Run(seed[:min(len(seed), 40)], func(t *testing.T) { checkDecoder(t, []byte(seed)) })
	}
}

// FuzzDecoder holds the Decoder to encoding/json: on every input it gives
// the same verdict (apart from nesting beyond MaxDepth, which it alone
// refuses) and, when both accept, the same values, through each way of
// reading: walking the document, skipping it, and the typed reads.
func FuzzDecoder(f *testing.F) {
	for _, s := range decoderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecoder)
}

func checkDecoder(t *testing.T, in []byte) {
	valid := json.Valid(in)
	tooDeep := valid && depth(in) > MaxDepth

	// Walking the whole document.
	d := NewDecoder(in)
	got, err := walk(&d)
	if err == nil {
		err = d.End()
	}
	switch {
	case err != nil:
		var se *SyntaxError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, ErrSyntax)
		require.True(t, se.Offset >= 0 && se.Offset <= len(in), "offset %d outside the input", se.Offset)
		if valid {
			require.True(t, tooDeep, "refused %q, which encoding/json accepts: %v", in, err)
			require.Equal(t, "nested deeper than 1000", se.Msg)
		}
	case !valid:
		require.Failf(t, "accepted invalid JSON", "%q", in)
	default:
		require.False(t, tooDeep, "accepted %q, nested deeper than MaxDepth", in)
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		var want any
		require.NoError(t, dec.Decode(&want))
		require.Equal(t, want, got, "decoding %q", in)
	}
	accepted := err == nil

	// Skipping it, and reading it as one value.
	d = NewDecoder(in)
	err = d.Skip()
	if err == nil {
		err = d.End()
	}
	require.Equal(t, accepted, err == nil, "Skip on %q: %v", in, err)
	d = NewDecoder(in)
	raw, err := d.ReadValue()
	if err == nil {
		err = d.End()
	}
	require.Equal(t, accepted, err == nil, "ReadValue on %q: %v", in, err)
	if accepted {
		assert.Equal(t, string(bytes.Trim(in, " \t\r\n")), string(raw))
	}

	// Typed reads decide as encoding/json does for the same Go type.
	d = NewDecoder(in)
	s, err := d.ReadString()
	if err == nil {
		err = d.End()
	}
	var wantS string
	errWant := json.Unmarshal(in, &wantS)
	require.Equal(t, errWant == nil, err == nil, "ReadString on %q: %v, encoding/json: %v", in, err, errWant)
	if err == nil {
		assert.Equal(t, wantS, s)
	}

	unquoted, errU := Unquote(in)
	require.Equal(t, err == nil && bytes.Trim(in, " \t\r\n")[0] == '"', errU == nil, "Unquote on %q: %v", in, errU)
	if errU == nil {
		assert.Equal(t, s, unquoted)
	}

	d = NewDecoder(in)
	n, err := d.ReadInt64()
	if err == nil {
		err = d.End()
	}
	var wantN int64
	errWant = json.Unmarshal(in, &wantN)
	require.Equal(t, errWant == nil, err == nil, "ReadInt64 on %q: %v, encoding/json: %v", in, err, errWant)
	if err == nil {
		assert.Equal(t, wantN, n)
	}
}

// walk decodes the next value into what encoding/json decodes it into
// with UseNumber, through Object, Array and the typed reads.
func walk(d *Decoder) (any, error) {
	switch d.Peek() {
	case '{':
		m := map[string]any{}
		err := d.Object(func(key []byte) error {
			v, err := walk(d)
			m[string(key)] = v
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := d.Array(func() error {
			v, err := walk(d)
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		return d.ReadString()
	case 'n':
		return nil, d.ReadNull()
	case 't', 'f':
		v, err := d.ReadValue()
		return string(v) == "true", err
	}
	v, err := d.ReadValue()
	return json.Number(v), err
}

// depth is the most arrays and objects open at once in a valid document.
func depth(doc []byte) int {
	n, deepest := 0, 0
	inString := false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			n++
			deepest = max(deepest, n)
		case c == ']' || c == '}':
			n--
		}
	}
	return deepest
}
