package sqlwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var compactCases = []struct {
	name    string
	text    string
	compact bool // isCompactJSON says yes
}{
	{"message", `{"role":"user","contents":[{"type":"text","text":"a \"b\" \\ \/ \b\f\n\r\t \u00e9 <&>"}],"n":[0,-1,2.5,1e10,-3E-2,1.0e+3],"t":true,"f":false,"z":null}`, true},
	{"empty containers", `{"a":{},"b":[],"c":""}`, true},
	{"scalar", `12`, true},
	{"invalid utf-8 in a string, as encoding/json accepts it", "\"a\xffb\"", true},
	{"space between members", `{"a": 1}`, false},
	{"leading space", ` 1`, false},
	{"trailing newline", "[1]\n", false},
	{"trailing data", `{"a":1}x`, false},
	{"two values", `1 2`, false},
	{"leading zero", `[01]`, false},
	{"bare minus", `-`, false},
	{"dot without digits", `1.`, false},
	{"exponent without digits", `1e`, false},
	{"control character in a string", "\"a\tb\"", false},
	{"bad escape", `"\x"`, false},
	{"short unicode escape", `"\u12g4"`, false},
	{"trailing comma", `[1,]`, false},
	{"missing colon", `{"a"1}`, false},
	{"unterminated", `{"a":"b`, false},
	{"truncated literal", `nul`, false},
	{"empty", ``, false},
	{"deep", strings.Repeat("[", maxCompactDepth+1) + strings.Repeat("]", maxCompactDepth+1), false},
	{"at the depth bound", strings.Repeat("[", maxCompactDepth) + strings.Repeat("]", maxCompactDepth), true},
}

func TestAppendJSONAgreesWithCompact(t *testing.T) {
	for _, tc := range compactCases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.compact, isCompactJSON([]byte(tc.text)), "isCompactJSON")
			var want bytes.Buffer
			werr := json.Compact(&want, []byte(tc.text))
			got, err := AppendJSON([]byte("x"), "c", []byte(tc.text))
			if werr != nil {
				require.NotNil(t, err, "AppendJSON accepted what json.Compact refuses")
				assert.Contains(t, err.Message, `JSON column "c" holds invalid JSON`)
				return
			}
			require.Nil(t, err)
			assert.Equal(t, "x"+want.String(), string(got))
		})
	}
}

// FuzzIsCompactJSON: what isCompactJSON accepts, json.Compact accepts and
// leaves unchanged.
func FuzzIsCompactJSON(f *testing.F) {
	for _, tc := range compactCases {
		f.Add([]byte(tc.text))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if !isCompactJSON(text) {
			return
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, text); err != nil {
			t.Fatalf("isCompactJSON accepted %q, which json.Compact refuses: %v", text, err)
		}
		if !bytes.Equal(buf.Bytes(), text) {
			t.Fatalf("isCompactJSON accepted %q, which json.Compact makes %q", text, buf.Bytes())
		}
	})
}
