package schema

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// stdDecode is what Decode did before decodeFast: json.Decoder with
// UseNumber, one value.
func stdDecode(doc []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

var fastDecodeCases = []struct {
	name string
	doc  string
	fast bool // decodeFast handles it itself
}{
	{"object", `{"role":"user","contents":[{"type":"text","text":"hi"}],"n":12345678901234567890}`, true},
	{"whitespace around", " \t\n{ \"a\" : [ 1 , 2.5e-3 , -0 , true , false , null ] }\r\n", true},
	{"escapes", `"a\"b\\c\/d\b\f\n\r\t\u00e9\u003c\u0000"`, true},
	{"utf-8", `"é 日本 \u65e5"`, true},
	{"duplicate keys: the last wins", `{"a":1,"a":2}`, true},
	{"empty containers", `{"a":{},"b":[],"c":""}`, true},
	{"surrogate pair", `"\ud83d\ude00"`, true},
	{"lone surrogate: U+FFFD", `"\ud83d x"`, true},
	{"invalid utf-8: U+FFFD", "\"a\xffb\"", true},
	{"invalid utf-8 in a key", "{\"a\xff\":1}", true},
	{"utf-8 encoded surrogate", "\"\xed\xa0\x80\"", true},
	{"trailing data", `{"a":1} x`, false},
	{"two values", `1 2`, false},
	{"leading zero", `01`, false},
	{"leading zero in array", `[01]`, false},
	{"bare minus", `-`, false},
	{"dot without digits", `1.`, false},
	{"exponent without digits", `1e+`, false},
	{"control character", "\"a\nb\"", false},
	{"bad escape", `"\x"`, false},
	{"short unicode escape", `"\u12"`, false},
	{"trailing comma in object", `{"a":1,}`, false},
	{"trailing comma in array", `[1,]`, false},
	{"missing colon", `{"a" 1}`, false},
	{"non-string key", `{1:2}`, false},
	{"unterminated string", `"abc`, false},
	{"unterminated object", `{"a":1`, false},
	{"truncated literal", `tru`, false},
	{"wrong literal", `nul1`, false},
	{"empty", ``, false},
	{"only whitespace", "  ", false},
	{"deep", string(bytes.Repeat([]byte("["), guestjson.MaxDepth+1)) + string(bytes.Repeat([]byte("]"), guestjson.MaxDepth+1)), false},
	{"at the depth bound", string(bytes.Repeat([]byte("["), guestjson.MaxDepth)) + string(bytes.Repeat([]byte("]"), guestjson.MaxDepth)), true},
}

func TestDecodeFastAgreesWithEncodingJSON(t *testing.T) {
	for _, tc := range fastDecodeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, _ := decodeFast([]byte(tc.doc))
			assert.Equal(t, tc.fast, ok, "decodeFast handled it")
			want, wantOK := stdDecode([]byte(tc.doc))
			if ok {
				require.True(t, wantOK, "decodeFast accepted what encoding/json refuses")
				assert.Equal(t, want, got)
			}
			// Decode as a whole agrees with encoding/json either way.
			v, err := Decode([]byte(tc.doc), "test")
			if wantOK {
				require.NoError(t, err)
				assert.Equal(t, want, v)
			} else {
				require.ErrorIs(t, err, ErrInvalid)
			}
		})
	}
}

// FuzzDecodeFast: decodeFast never accepts what encoding/json refuses, and
// decodes what it accepts to the same value.
func FuzzDecodeFast(f *testing.F) {
	for _, tc := range fastDecodeCases {
		f.Add([]byte(tc.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, ok, _ := decodeFast(doc)
		if !ok {
			return
		}
		want, wantOK := stdDecode(doc)
		if !wantOK {
			t.Fatalf("decodeFast accepted %q, which encoding/json refuses", doc)
		}
		if !assert.ObjectsAreEqual(want, got) {
			t.Fatalf("decodeFast(%q) = %#v, encoding/json: %#v", doc, got, want)
		}
	})
}

// sessionDoc is a typical session as the host saves and loads it: an
// in-memory history of n messages (text with a newline, a non-ASCII word
// and an escaped '<', timestamps, a tool call and its result), encoded by
// encoding/json as the host writes it.
func sessionDoc(n int) []byte {
	msgs := make([]any, 0, n)
	for i := range n {
		var m map[string]any
		switch i % 4 {
		case 0:
			m = map[string]any{"role": "user", "contents": []any{map[string]any{"type": "text",
				"text": "What did I say about the café <menu> yesterday?\nKeep it short."}}}
		case 1:
			m = map[string]any{"role": "assistant", "contents": []any{map[string]any{"type": "function_call",
				"call_id": "call_" + strconv.Itoa(i), "name": "search", "arguments": map[string]any{"query": "café menu", "limit": 5}}}}
		case 2:
			m = map[string]any{"role": "tool", "contents": []any{map[string]any{"type": "function_result",
				"call_id": "call_" + strconv.Itoa(i-1), "result": map[string]any{"hits": []any{"soup", "bread", 3.5, true, nil}}}}}
		default:
			m = map[string]any{"role": "assistant", "contents": []any{map[string]any{"type": "text",
				"text":  "You said the soup was good and the bread was better. It costs 3.50 €.",
				"usage": map[string]any{"input_tokens": 1200 + i, "output_tokens": 40, "total_tokens": 1240 + i}}}}
		}
		m["message_id"] = "msg_" + strconv.Itoa(i)
		m["created_at"] = "2026-11-26T05:12:01.123456Z"
		msgs = append(msgs, m)
	}
	doc, err := json.Marshal(map[string]any{
		"schema_version": 1, "session_id": "demo", "service_session_id": "resp_abc", "revision": 42,
		"state": map[string]any{"history": map[string]any{"provider": "inmemory", "state_version": 1,
			"data": map[string]any{"messages": msgs}}},
	})
	if err != nil {
		panic(err)
	}
	return doc
}

// BenchmarkDecodeSession decodes a session of 20 messages, as every save
// and load of a session checks it.
func BenchmarkDecodeSession(b *testing.B) {
	doc := sessionDoc(20)
	if _, ok, _ := decodeFast(doc); !ok {
		b.Fatal("the session takes the slow path")
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(doc, "session.json"); err != nil {
			b.Fatal(err)
		}
	}
}
