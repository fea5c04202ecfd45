package guestjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireSyntaxError checks err is a *SyntaxError matching ErrSyntax, at
// offset with msg, and returns it.
func requireSyntaxError(t *testing.T, err error, offset int, msg string) {
	t.Helper()
	var se *SyntaxError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, ErrSyntax)
	assert.Equal(t, offset, se.Offset, "offset")
	assert.Equal(t, msg, se.Msg, "message")
}

func TestSyntaxError(t *testing.T) {
	d := NewDecoder([]byte(`{"a" 1}`))
	err := d.Object(func([]byte) error { return d.Skip() })
	requireSyntaxError(t, err, 5, "want ':'")
	assert.EqualError(t, err, "malformed JSON at offset 5: want ':'")
}

// TestObject checks keys are decoded, values left to the callback, and
// that null is an object without members.
func TestObject(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string // key -> raw value
		wantErr string
		offset  int
	}{
		{name: "members", in: ` { "a" : 1 , "b":[true, {}] } `, want: map[string]string{"a": "1", "b": "[true, {}]"}},
		{name: "empty", in: `{}`, want: map[string]string{}},
		{name: "null", in: `null`, want: map[string]string{}},
		{name: "escaped key", in: `{"st\u0061te":null,"\ud83d\ude00":2}`, want: map[string]string{"state": "null", "😀": "2"}},
		{name: "invalid UTF-8 key", in: "{\"a\xffb\":0}", want: map[string]string{"a\uFFFDb": "0"}},
		{name: "not an object", in: `[1]`, wantErr: "want an object"},
		{name: "bad null", in: `nul`, wantErr: "want null"},
		{name: "key not a string", in: `{1:2}`, wantErr: "want a string key", offset: 1},
		{name: "trailing comma", in: `{"a":1,}`, wantErr: "want a string key", offset: 7},
		{name: "missing comma", in: `{"a":1 "b":2}`, wantErr: "want ',' or '}'", offset: 7},
		{name: "unterminated", in: `{"a":1`, wantErr: "want ',' or '}'", offset: 6},
		{name: "bad value", in: `{"a":tru}`, wantErr: "want true", offset: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder([]byte(tt.in))
			got := map[string]string{}
			err := d.Object(func(key []byte) error {
				v, err := d.ReadValue()
				got[string(key)] = string(v)
				return err
			})
			if tt.wantErr != "" {
				requireSyntaxError(t, err, tt.offset, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, d.End())
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestArray(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
		offset  int
	}{
		{name: "elements", in: `[1, "a" ,{"b":[]},null]`, want: []string{"1", `"a"`, `{"b":[]}`, "null"}},
		{name: "empty", in: ` [ ] `, want: nil},
		{name: "null", in: `null`, want: nil},
		{name: "not an array", in: `{}`, wantErr: "want an array"},
		{name: "trailing comma", in: `[1,]`, wantErr: "unexpected ']'", offset: 3},
		{name: "missing comma", in: `[1 2]`, wantErr: "want ',' or ']'", offset: 3},
		{name: "end of input", in: `[1,`, wantErr: "unexpected end of input", offset: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder([]byte(tt.in))
			var got []string
			err := d.Array(func() error {
				v, err := d.ReadValue()
				got = append(got, string(v))
				return err
			})
			if tt.wantErr != "" {
				requireSyntaxError(t, err, tt.offset, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, d.End())
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestCallbackError checks an error of the caller's own comes back as it is.
func TestCallbackError(t *testing.T) {
	mine := errors.New("mine")
	d := NewDecoder([]byte(`{"a":[1]}`))
	err := d.Object(func([]byte) error { return d.Array(func() error { return mine }) })
	assert.Same(t, mine, err)
}

func TestReadValue(t *testing.T) {
	doc := []byte(` {"a": [1, 2]} `)
	d := NewDecoder(doc)
	v, err := d.ReadValue()
	require.NoError(t, err)
	assert.Equal(t, `{"a": [1, 2]}`, string(v))
	assert.Equal(t, len(v), cap(v), "appending to a value must not overwrite the document")
	require.NoError(t, d.End())
}

func TestEnd(t *testing.T) {
	d := NewDecoder([]byte(`{} x`))
	require.NoError(t, d.Skip())
	requireSyntaxError(t, d.End(), 3, "data after the document")
}

func TestReadString(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "plain", in: `"abc"`, want: "abc"},
		{name: "escapes", in: `"a\"b\\c\/\b\f\n\r\t\u00e9"`, want: "a\"b\\c/\b\f\n\r\té"},
		{name: "null", in: `null`, want: ""},
		{name: "invalid UTF-8", in: "\"a\xffb\"", want: "a\uFFFDb"},
		{name: "number", in: `5`, wantErr: "want a string"},
		{name: "control character", in: "\"a\x01\"", wantErr: "control character in string"},
		{name: "bad escape", in: `"\x"`, wantErr: "bad escape"},
		{name: "bad unicode escape", in: `"\u00g0"`, wantErr: "bad \\u escape"},
		{name: "short unicode escape", in: `"\u00"`, wantErr: "short \\u escape"},
		{name: "unterminated escape", in: `"\`, wantErr: "unterminated escape"},
		{name: "unterminated", in: `"abc`, wantErr: "unterminated string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder([]byte(tt.in))
			got, err := d.ReadString()
			if tt.wantErr != "" {
				var se *SyntaxError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tt.wantErr, se.Msg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReadInt(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: `0`, want: 0},
		{in: `-0`, want: 0},
		{in: `null`, want: 0},
		{in: `42`, want: 42},
		{in: `9223372036854775807`, want: 1<<63 - 1},
		{in: `-9223372036854775808`, want: -1 << 63},
		{in: `9223372036854775808`, wantErr: true},
		{in: `-9223372036854775809`, wantErr: true},
		{in: `99999999999999999999`, wantErr: true},
		{in: `1.5`, wantErr: true},
		{in: `1.0`, wantErr: true},
		{in: `1e2`, wantErr: true},
		{in: `"5"`, wantErr: true},
		{in: `01`, want: 0}, // 0, then data that End refuses
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d := NewDecoder([]byte(tt.in))
			got, err := d.ReadInt64()
			if tt.wantErr {
				requireSyntaxError(t, err, 0, "want an integer")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestParseInt32 checks the range of a 32-bit int, what ReadInt decodes on
// a 32-bit platform.
func TestParseInt32(t *testing.T) {
	for in, ok := range map[string]bool{"2147483647": true, "-2147483648": true, "2147483648": false, "-2147483649": false} {
		_, got := parseInt([]byte(in), 32)
		assert.Equal(t, ok, got, in)
	}
}

func TestNumberGrammar(t *testing.T) {
	for _, in := range []string{`0`, `-0`, `1`, `-12`, `1.5`, `1e5`, `1E+5`, `-1.25e-3`, `0.0`} {
		d := NewDecoder([]byte(in))
		require.NoError(t, d.Skip(), in)
		assert.NoError(t, d.End(), in)
	}
	for _, in := range []string{`-`, `1.`, `.5`, `1e`, `1e+`, `-a`, `+1`} {
		d := NewDecoder([]byte(in))
		err := d.Skip()
		if err == nil {
			err = d.End()
		}
		assert.ErrorIs(t, err, ErrSyntax, in)
	}
}

// TestMaxDepth checks the cap is exactly MaxDepth, for the skipping and
// the callback paths alike.
func TestMaxDepth(t *testing.T) {
	nested := func(n int) []byte { return []byte(strings.Repeat(`[`, n) + strings.Repeat(`]`, n)) }
	for _, n := range []int{MaxDepth, MaxDepth + 1} {
		d := NewDecoder(nested(n))
		err := d.Skip()
		var walk func() error
		w := NewDecoder(nested(n))
		walk = func() error { return w.Array(walk) }
		errWalk := walk()
		if n <= MaxDepth {
			assert.NoError(t, err, "skip %d levels", n)
			assert.NoError(t, errWalk, "walk %d levels", n)
			continue
		}
		requireSyntaxError(t, err, MaxDepth, "nested deeper than 1000")
		requireSyntaxError(t, errWalk, MaxDepth, "nested deeper than 1000")
	}
	// Depth counts from the document's top, whichever method opened a level.
	d := NewDecoder([]byte(`{"a":` + string(nested(MaxDepth)) + `}`))
	err := d.Object(func([]byte) error { return d.Skip() })
	assert.ErrorContains(t, err, "nested deeper")
}

func TestUnquote(t *testing.T) {
	tests := []struct{ name, in, want, wantErr string }{
		{name: "plain", in: `"abc"`, want: "abc"},
		{name: "escapes", in: `"a\"b\\c\n\u00e9"`, want: "a\"b\\c\né"},
		{name: "empty", in: `""`, want: ""},
		{name: "white space", in: ` "a" `, want: "a"},
		{name: "not a string", in: `abc`, wantErr: "want a string"},
		{name: "null", in: `null`, wantErr: "want a string"},
		{name: "data after", in: `"a" "b"`, wantErr: "data after the document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Unquote([]byte(tt.in))
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ud83d\u0041"`,
		`"\ude00\ud83d"`, `"\ud800\ud800\udc00"`, "\"bad \xff utf-8 \\n\"", "\"cut \xe2\x82\"",
	} {
		t.Run(lit, func(t *testing.T) {
			var want string
			require.NoError(t, json.Unmarshal([]byte(lit), &want))
			assert.Equal(t, want, string(unescape([]byte(lit[1:len(lit)-1]))))
		})
	}
}

// TestPlainWord: plainWord agrees with the byte table for every byte value
// at every position, among plain and among other bytes, and on random words.
func TestPlainWord(t *testing.T) {
	word := func(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
	for _, fill := range []byte{'a', 0x80, 0xff, 0x1f, '"'} {
		for c := range 256 {
			for p := range 8 {
				b := bytes.Repeat([]byte{fill}, 8)
				b[p] = byte(c)
				require.Equal(t, plain[fill] && plain[c], plainWord(word(b)), "byte %#x at %d among %#x", c, p, fill)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		var b [8]byte
		want := true
		for i := range b {
			b[i] = byte(r.Uint32())
			want = want && plain[b[i]]
		}
		require.Equal(t, want, plainWord(word(b[:])), "%x", b)
	}
}

// TestStopMask: stopMask's lowest set bit is that of the first byte that
// ends plainEnd's run (a quote, a backslash, a control character or a byte
// outside ASCII), and it is zero when there is none, for every byte value
// at every position, among plain and among other bytes, and on random words.
func TestStopMask(t *testing.T) {
	word := func(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
	stops := func(c byte) bool { return c < 0x20 || c >= 0x80 || c == '"' || c == '\\' }
	first := func(b []byte) int {
		for i, c := range b {
			if stops(c) {
				return i
			}
		}
		return -1
	}
	got := func(m uint64) int {
		if m == 0 {
			return -1
		}
		return bits.TrailingZeros64(m) >> 3
	}
	for _, fill := range []byte{'a', 0x80, 0xff, 0x1f, '"', '\\', 0x21, 0x7f} {
		for c := range 256 {
			for p := range 8 {
				b := bytes.Repeat([]byte{fill}, 8)
				b[p] = byte(c)
				require.Equal(t, first(b), got(stopMask(word(b))), "byte %#x at %d among %#x", c, p, fill)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		var b [8]byte
		for i := range b {
			// Mostly plain bytes, so that the first stop falls anywhere.
			if b[i] = byte(0x20 + r.IntN(0x60)); r.IntN(8) == 0 {
				b[i] = byte(r.Uint32())
			}
		}
		require.Equal(t, first(b[:]), got(stopMask(word(b[:]))), "%x", b)
	}
}

// TestScanStringStrides: a byte that ends a run of plain bytes is found at
// every position of a long string, whichever stride (32, 8 or 1 bytes)
// reaches it: the string ends there, or its escape or control character is
// seen, exactly as encoding/json sees it.
func TestScanStringStrides(t *testing.T) {
	for _, special := range []string{`"`, `\n`, `\u00e9`, "\x01", "é"} {
		for p := range 100 {
			body := strings.Repeat("a", p) + special + strings.Repeat("b", 99-p)
			doc := []byte(`"` + body + `"`)
			d := NewDecoder(doc)
			got, err := d.ReadString()
			var want string
			wantErr := json.Unmarshal(doc, &want)
			if special == `"` {
				// The string ends at p; what follows is not JSON.
				require.NoError(t, err, "position %d", p)
				assert.Equal(t, strings.Repeat("a", p), got, "position %d", p)
				assert.Equal(t, p+2, d.Offset(), "position %d", p)
				continue
			}
			if wantErr != nil {
				requireSyntaxError(t, err, p+1, "control character in string")
				continue
			}
			require.NoError(t, err, "%q at %d", special, p)
			assert.Equal(t, want, got, "%q at %d", special, p)
			assert.Equal(t, len(doc), d.Offset(), "%q at %d", special, p)
		}
	}
}

// TestReadStringAs: the guess comes back, without an allocation, exactly
// when the string decodes to its text (escapes resolved); otherwise the
// string read, as ReadString returns it.
func TestReadStringAs(t *testing.T) {
	for _, tt := range []struct{ doc, like, want string }{
		{`"abc"`, "abc", "abc"},
		{`"a\u0062c"`, "abc", "abc"},
		{`"abc"`, "abd", "abc"},
		{`"abc"`, "", "abc"},
		{`""`, "x", ""},
		{`null`, "x", ""},
	} {
		d := NewDecoder([]byte(tt.doc))
		got, err := d.ReadStringAs(tt.like)
		require.NoError(t, err, tt.doc)
		assert.Equal(t, tt.want, got, tt.doc)
	}
	doc := []byte(`"session-0001"`)
	like := "session-0001"
	allocs := testing.AllocsPerRun(100, func() {
		d := NewDecoder(doc)
		if s, err := d.ReadStringAs(like); err != nil || s != like {
			t.Fatal(s, err)
		}
	})
	assert.Zero(t, allocs, "a string equal to the guess must not be copied")
	allocs = testing.AllocsPerRun(100, func() {
		d := NewDecoder(doc)
		if _, err := d.ReadStringAs("other"); err != nil {
			t.Fatal(err)
		}
	})
	assert.Equal(t, 1.0, allocs, "another string is copied once")
}

// TestPlainEnd holds plainEnd, the fast path for keys and plain values, to
// a byte-by-byte reading: the closing quote found wherever it falls in the
// eight-byte strides, and -1 for anything that needs scanString (an escape,
// a control character, a byte outside ASCII) or no closing quote.
func TestPlainEnd(t *testing.T) {
	reference := func(b []byte, i int) int {
		for ; i < len(b); i++ {
			switch c := b[i]; {
			case c == '"':
				return i
			case c < 0x20 || c >= 0x80 || c == '\\':
				return -1
			}
		}
		return -1
	}
	for _, stop := range []string{`"`, `\`, "\x00", "\x1f", "\x7f", "\x80", "é", "\xff", ""} {
		for n := 0; n <= 100; n++ {
			for _, tail := range []string{``, `"`, `abc"def`, "\x01\""} {
				b := []byte(`"` + strings.Repeat("k", n) + stop + tail)
				name := strconv.Quote(string(b))
				require.Equal(t, reference(b, 1), plainEnd(b, 1), name)
			}
		}
	}
}

// TestSkipIf: SkipIf moves past a value equal to the one given, after
// white space, and otherwise consumes only the white space.
func TestSkipIf(t *testing.T) {
	tests := []struct {
		name, doc, value string
		want             bool
		offset           int
	}{
		{name: "same object", doc: ` {"a":"b"},1`, value: `{"a":"b"}`, want: true, offset: 10},
		{name: "another object", doc: ` {"a":"c"},1`, value: `{"a":"b"}`, offset: 1},
		{name: "the document ends inside it", doc: ` {"a":"b"`, value: `{"a":"b"}`, offset: 1},
		{name: "nothing to compare", doc: `{}`, value: ``, offset: 0},
		{name: "short, same", doc: `"ab"`, value: `"ab"`, want: true, offset: 4},
		{name: "short, another", doc: `"ac"`, value: `"ab"`, offset: 0},
		{name: "differs in its last byte", doc: `{"session_id":"bench","state_key":"historz"}`, value: `{"session_id":"bench","state_key":"history"}`, offset: 0},
		{name: "differs in its first word", doc: `{"sessiom_id":"bench","state_key":"history"}`, value: `{"session_id":"bench","state_key":"history"}`, offset: 0},
		{name: "long, same", doc: `{"session_id":"bench","state_key":"history"}`, value: `{"session_id":"bench","state_key":"history"}`, want: true, offset: 44},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder([]byte(tt.doc))
			require.Equal(t, tt.want, d.SkipIf([]byte(tt.value)))
			require.Equal(t, tt.offset, d.Offset())
		})
	}
}

// TestSkipStrides: skipContainer finds a string's end in place within its
// first sixteen bytes and through plainEnd beyond them; a quote, an
// escape, a control character or a byte outside ASCII at every position
// of keys and values, near the document's end or not, is skipped or
// refused as encoding/json accepts or refuses the document.
func TestSkipStrides(t *testing.T) {
	for _, special := range []string{`"`, `\n`, `\u00e9`, "\x01", "é", `\x`} {
		for p := range 40 {
			body := strings.Repeat("a", p) + special + strings.Repeat("b", 39-p)
			short := strings.Repeat("c", p)
			for _, doc := range []string{
				`{"k":"` + body + `","n":[1]}`,
				`["` + body + `",{"` + body + `":1}]`,
				`[{"` + short + `":"` + short + `"},"` + body + `"]`,
				`["` + body + `"]`,
			} {
				d := NewDecoder([]byte(doc))
				err := d.Skip()
				if !json.Valid([]byte(doc)) {
					require.ErrorIs(t, err, ErrSyntax, "%q", doc)
					continue
				}
				require.NoError(t, err, "%q", doc)
				assert.Equal(t, len(doc), d.Offset(), "%q", doc)
			}
		}
	}
}

// TestMembersTake: a member is taken once, and only when its value starts
// with the byte wanted.
func TestMembersTake(t *testing.T) {
	d := NewDecoder([]byte(` {"a": 1}`))
	var m Members
	assert.False(t, m.Take(&d, 1, '"'), "the value is an object, not a string")
	assert.True(t, m.Take(&d, 1, '{'))
	assert.False(t, m.Take(&d, 1, '{'), "taken twice")
	assert.True(t, m.Take(&d, 2, 0), "any value")
	assert.False(t, m.Take(&d, 2, 0), "taken twice")
	assert.Equal(t, Members(3), m)
}
