package guestjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// marshalString is what encoding/json writes for s with HTML escaping off,
// the output AppendString must match byte for byte.
func marshalString(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(s))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// checkAppendString holds AppendString, for both of its argument types, to
// encoding/json's bytes (so it decodes back to s, each byte of invalid
// UTF-8 as U+FFFD).
func checkAppendString(t testing.TB, s string) {
	want := marshalString(t, s)
	got := AppendString([]byte("x"), s)
	require.Equal(t, "x"+string(want), string(got), "string %q", s)
	assert.Equal(t, string(want), string(AppendString(nil, []byte(s))), "[]byte %q", s)
}

func TestAppendStringIsWhatEncodingJSONWrites(t *testing.T) {
	tests := []struct{ name, s string }{
		{"empty", ""},
		{"plain", "hello, world"},
		{"quote and backslash", `say "hi" \ bye`},
		{"short escapes", "a\nb\rc\td"},
		{"other control characters", "\x00\x01\x08\x0c\x1f\x7f"},
		{"html kept", "<a href='x'>&amp;</a>"},
		{"multi-byte", "é 日本 🙂"},
		{"line and paragraph separators", "a\u2028b\u2029c"},
		{"invalid UTF-8", "a\xffb\xc3"},
		{"truncated rune at the end", "日"[:2]},
		{"escape at both ends", "\"mid\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkAppendString(t, tt.s) })
	}
}

// FuzzAppendString: any bytes, valid UTF-8 or not.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"\\\n\x01", "\u2028é\xff", "<>&", string(utf8.RuneError)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkAppendString(t, s) })
}
