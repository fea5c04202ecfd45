package host

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

var fastOutputCases = []struct {
	name string
	out  string
	fast bool // decodeOutputFast decodes it itself, as provide's response
}{
	{"messages", `{"messages":[{"role":"user","contents":[{"type":"text","text":"a\"b\\n"}]},{"role":"assistant","contents":[]}]}`, true},
	{"from state", `{"from_state":{"pointer":"/messages","window":{"max_messages":20,"max_tokens":-3}}}`, true},
	{"state and patch", `{"state":{"a":[1,{"b":null}]},"state_patch":[{"op":"add","path":"/a/-","value":{"x":1}},{"op":"remove","path":"/b"}]}`, true},
	{"spaces", " {\n\"messages\" : [ 1 , \"x\" , null ] ,\t\"state\" : null } ", true},
	{"empty", `{}`, true},
	{"empty arrays", `{"messages":[],"state_patch":[]}`, true},
	{"empty patch op", `{"state_patch":[{}]}`, true},
	{"null window bound", `{"from_state":{"pointer":"/m","window":{"max_messages":null}}}`, true},
	{"escaped key, the same key decoded", `{"st\u0061te":1}`, true},
	{"escapes and surrogates in strings", `{"from_state":{"pointer":"/a\u00e9\ud83d\ude00\ud800"}}`, true},

	{"key in another case", `{"Messages":[]}`, false},
	{"unknown member", `{"messages":[],"next_cursor":"x"}`, false},
	{"unknown member of from_state", `{"from_state":{"pointer":"/m","limit":1}}`, false},
	{"unknown member of a patch op", `{"state_patch":[{"op":"add","path":"/a","val":1}]}`, false},
	{"duplicate messages", `{"messages":[1],"messages":[2]}`, false},
	{"duplicate state", `{"state":1,"state":2}`, false},
	{"duplicate op", `{"state_patch":[{"op":"add","op":"remove"}]}`, false},
	{"duplicate bound", `{"from_state":{"window":{"max_tokens":1,"max_tokens":2}}}`, false},
	{"null messages", `{"messages":null}`, false},
	{"null from_state", `{"from_state":null}`, false},
	{"null patch", `{"state_patch":null}`, false},
	{"null patch op", `{"state_patch":[null]}`, false},
	{"null op", `{"state_patch":[{"op":null}]}`, false},
	{"messages not an array", `{"messages":"x"}`, false},
	{"pointer not a string", `{"from_state":{"pointer":1}}`, false},
	{"bound not an integer", `{"from_state":{"window":{"max_messages":1.5}}}`, false},
	{"bound with an exponent", `{"from_state":{"window":{"max_messages":1e2}}}`, false},
	{"bound out of range", `{"from_state":{"window":{"max_messages":99999999999999999999}}}`, false},
	{"bound a string", `{"from_state":{"window":{"max_messages":"1"}}}`, false},
	{"invalid utf-8", "{\"state\":\"\xff\"}", false},
	{"syntax error in a message", `{"messages":[{"role":}]}`, false},
	{"trailing comma", `{"messages":[1,]}`, false},
	{"trailing data", `{"state":1}garbage`, false},
	{"two values", `{} {}`, false},
	{"not an object", `[]`, false},
	{"null", `null`, false},
	{"nothing", ``, false},
	{"too deep", `{"state":` + strings.Repeat("[", guestjson.MaxDepth) + strings.Repeat("]", guestjson.MaxDepth) + `}`, false},
}

// TestDecodeOutputFast checks that the one-pass decoder takes the responses
// it should and leaves the others to encoding/json, and that whatever it
// takes it decodes as encoding/json does.
func TestDecodeOutputFast(t *testing.T) {
	for _, tc := range fastOutputCases {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := decodeOutputFast([]byte(tc.out), true)
			assert.Equal(t, tc.fast, ok)
			checkOutputFast(t, []byte(tc.out))
		})
	}
}

// TestDecodeChangeFastSkipsProvideMembers: a store's response with
// provide's members has them skipped, as encoding/json skips them, but not
// when they are not JSON.
func TestDecodeChangeFastSkipsProvideMembers(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		fast      bool
	}{
		{"skipped", `{"messages":{"a":1},"from_state":7,"messages":null,"state":{}}`, true},
		{"skipped, but not JSON", `{"messages":[1,],"state":{}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := decodeOutputFast([]byte(tc.out), false)
			assert.Equal(t, tc.fast, ok)
			checkOutputFast(t, []byte(tc.out))
		})
	}
}

// TestDecodeOutputErrors checks that a response left to encoding/json fails
// with the error it always had.
func TestDecodeOutputErrors(t *testing.T) {
	for _, tc := range []struct {
		name, out, want string
	}{
		{"messages not an array", `{"messages":"x"}`, "invalid plugin output: response is not the expected JSON: json: cannot unmarshal string into Go struct field ProvideResponse.messages of type []json.RawMessage"},
		{"syntax", `{"messages":[1,]}`, "invalid plugin output: response is not the expected JSON: invalid character ']' looking for beginning of value"},
		{"invalid utf-8", "{\"state\":\"\xff\"}", "invalid plugin output: response is not valid UTF-8 (byte 10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeProvide([]byte(tc.out))
			require.ErrorIs(t, err, ErrInvalidOutput)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

// checkOutputFast decodes out both ways, as provide's response and as
// store's, and fails unless decodeOutputFast refuses it or decodes it as
// encoding/json does (after unmarshalOutput's UTF-8 check).
func checkOutputFast(t *testing.T, out []byte) {
	t.Helper()
	for _, provide := range []bool{true, false} {
		got, ok := decodeOutputFast(out, provide)
		if !ok {
			continue
		}
		var want abi.ProvideResponse
		var err error
		if provide {
			err = unmarshalOutput(abi.ExportProvide, out, &want)
		} else {
			var sr abi.StoreResponse
			err = unmarshalOutput(abi.ExportStore, out, &sr)
			want.StateChange = sr.StateChange
		}
		require.NoError(t, err, "decodeOutputFast accepted what encoding/json refuses: %q", out)
		require.Equal(t, want, got, "%q", out)
	}
}

// FuzzDecodeOutputFast feeds responses to both decoders: decodeOutputFast
// must refuse what encoding/json refuses and decode the rest to the same
// value.
func FuzzDecodeOutputFast(f *testing.F) {
	for _, tc := range fastOutputCases {
		f.Add([]byte(tc.out))
	}
	for _, s := range outputSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		checkOutputFast(t, out)
	})
}
