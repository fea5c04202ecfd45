package provider

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

var decodeSeeds = []string{
	``,
	`null`,
	`{}`,
	`[]`,
	`{"max_messages":3,"max_tokens":100}`,
	`{"max_messages":null}`,
	`{"max_messages":1.5}`,
	`{"max_messages":1e2}`,
	`{"max_tokens":"3"}`,
	`{"max_tokens":99999999999999999999}`,
	`{"messages":[]}`,
	`{"messages":null}`,
	`{"messages":{}}`,
	` {"messages" : [ {"role":"user","contents":[{"type":"text","text":"a\"b\u00e9"}]} , 1 , null , "s" , [true,false] ] , "x":{"y":[]} } `,
	`{"messages":[{"a":1},{"b":2}],"messages":[{"c":3}]}`,
	`{"messages":[01]}`,
	`{"messages":[1.]}`,
	`{"messages":["\x"]}`,
	`{"messages":[tru]}`,
	`{"messages":[1,]}`,
	`{"messages":[1]} x`,
	`{"messages":[1]}` + "\x00",
	`{"messages":[` + strings.Repeat(`[`, 1500) + strings.Repeat(`]`, 1500) + `]}`,
	`{"a" 1}`,
}

// TestDecodeMatchesEncodingJSON checks parseConfig and stateMessages
// against encoding/json on the seeds. The scanning under them,
// sdk.JSONDecoder, is fuzzed in internal/guestjson; these cases hold what
// they add: field names, null,
// integers, the messages array.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, seed := range decodeSeeds {
		t.Run(seed[:min(len(seed), 40)], func(t *testing.T) { checkDecode(t, []byte(seed)) })
	}
}

// checkDecode holds parseConfig and stateMessages to encoding/json
// (sdk.DecodeConfig and sdk.DecodeState, which the plugin used before):
// what they accept is valid JSON decoding to the same values, what they
// refuse is invalid_argument, and valid documents encoding/json decodes are
// refused only for nesting beyond sdk.MaxJSONDepth or a value of the
// wrong kind. Field names are exact, where encoding/json ignores case; such
// input is skipped.
func checkDecode(t *testing.T, in []byte) {
	if strings.Contains(strings.ToLower(string(in)), `"max_`) || strings.Contains(strings.ToLower(string(in)), `"messages"`) {
		for _, k := range []string{`"max_messages"`, `"max_tokens"`, `"messages"`} {
			if strings.Count(strings.ToLower(string(in)), k) != strings.Count(string(in), k) {
				return
			}
		}
	}
	if strings.Contains(string(in), `\u`) {
		return // an escaped key may spell a field name in another case, which the check above cannot see
	}
	empty := len(in) == 0

	cfg, errFast := parseConfig(in)
	var slowCfg Config
	errSlow := error(nil)
	if !empty {
		errSlow = json.Unmarshal(in, &slowCfg)
	}
	check(t, "config", in, errFast, errSlow)
	if errFast == nil && errSlow == nil {
		require.Equal(t, slowCfg, cfg, "config %q", in)
	}

	msgs, errFast := stateMessages(in)
	var st State
	errSlow = nil
	if !empty {
		errSlow = json.Unmarshal(in, &st)
	}
	check(t, "state", in, errFast, errSlow)
	if errFast == nil && errSlow == nil && utf8.Valid(in) {
		require.Equal(t, st.Messages, msgs, "state %q", in)
	}
}

func check(t *testing.T, what string, in []byte, errFast, errSlow error) {
	t.Helper()
	if errFast != nil {
		require.ErrorIs(t, errFast, abi.ErrInvalidArgument, "%s %q", what, in)
	}
	if errFast == nil && len(in) > 0 {
		require.True(t, json.Valid(in), "%s %q: accepted, but it is not JSON", what, in)
	}
	if errFast != nil && errSlow == nil {
		documented := strings.Contains(errFast.Error(), "nested deeper") || strings.Contains(errFast.Error(), "want an")
		require.True(t, documented, "%s %q: refused (%v), but encoding/json decodes it", what, in, errFast)
	}
}
