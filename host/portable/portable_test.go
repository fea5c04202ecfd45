package portable_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/schemas"
)

func TestRoundTrip(t *testing.T) {
	s := demoSession()
	history := map[string][]abi.Message{"history": turns(9, 10), "audit": turns(3, 0)}
	doc := export(t, s, history)
	require.NoError(t, schema.Project(schemas.PortableSession).Validate(doc), "%s", doc)

	got, slots, msgs, err := readAll(doc, portable.Limits{})
	require.NoError(t, err)
	want := s.Clone()
	want.State = nil
	assert.Equal(t, want, got)
	assert.Equal(t, []portable.Slot{
		{Key: "audit", Plugin: "inmemory"},
		{Key: "history", Plugin: "sqlite", PluginVersion: "0.3.0"},
	}, slots)
	assert.Equal(t, history, msgs)
}

// TestSortedKeysDocumentReads: a document any JSON library writes with
// its keys sorted reads, because the members' order is alphabetical.
func TestSortedKeysDocumentReads(t *testing.T) {
	doc := export(t, demoSession(), map[string][]abi.Message{"history": turns(5, 3)})
	var generic map[string]any
	require.NoError(t, json.Unmarshal(doc, &generic))
	sorted, err := json.Marshal(generic) // encoding/json sorts map keys
	require.NoError(t, err)
	require.NotEqual(t, doc, sorted)
	_, _, msgs, err := readAll(sorted, portable.Limits{})
	require.NoError(t, err)
	assert.Len(t, msgs["history"], 5)
}

// TestNewerMinorReads: a 1.x document with members this version does not
// know reads, the unknown members ignored.
func TestNewerMinorReads(t *testing.T) {
	doc := `{"format_version":"1.7","extra":{"a":[1,2]},"session":{"session_id":"s","revision":1,"new_field":true},
"slots":[{"key":"h","origin":"x","plugin":"p","stored_messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}],"after":1}],
"totals":{"slots":1,"messages":1,"bytes":9},"trailer":null}`
	s, slots, msgs, err := readAll([]byte(doc), portable.Limits{})
	require.NoError(t, err)
	assert.Equal(t, "s", s.SessionID)
	assert.Equal(t, []portable.Slot{{Key: "h", Plugin: "p"}}, slots)
	assert.Equal(t, []abi.Message{abi.NewMessage(abi.RoleUser, "hi")}, msgs["h"])
}

const (
	head = `{"format_version":"1.0","session":{"session_id":"s","revision":1},"slots":[`
	ok   = `{"role":"user","contents":[{"type":"text","text":"hi"}]}`
)

func TestReaderRefuses(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		lim     portable.Limits
		want    error
		slot    string
		message int
		inText  string
	}{
		{name: "not JSON", doc: `{"format_version" 1}`, want: portable.ErrMalformed, message: -1},
		{name: "an array", doc: `[` + ok + `]`, want: portable.ErrMalformed, message: -1, inText: "ReadOpenAI"},
		{name: "a session file", doc: `{"schema_version":1,"session_id":"s","revision":1}`, want: portable.ErrMalformed, message: -1, inText: "session file"},
		{name: "version not first", doc: `{"session":{"session_id":"s","revision":1},"format_version":"1.0"}`, want: portable.ErrMalformed, message: -1, inText: "first member"},
		{name: "unknown major", doc: `{"format_version":"2.0","session":{"what":"ever"}}`, want: portable.ErrVersion, message: -1, inText: "format 2.0"},
		{name: "version not MAJOR.MINOR", doc: `{"format_version":"1"}`, want: portable.ErrMalformed, message: -1},
		{name: "version not a string", doc: `{"format_version":1.0}`, want: portable.ErrMalformed, message: -1},
		{name: "session without id", doc: `{"format_version":"1.0","session":{"revision":1},"slots":[]}`, want: portable.ErrMalformed, message: -1, inText: "session_id"},
		{name: "session past the largest revision", doc: `{"format_version":"1.0","session":{"session_id":"s","revision":9223372036854775807},"slots":[]}`, want: portable.ErrMalformed, message: -1},
		{name: "slots before session", doc: `{"format_version":"1.0","slots":[]}`, want: portable.ErrMalformed, message: -1},
		{name: "session twice", doc: `{"format_version":"1.0","session":{"session_id":"s","revision":1},"session":{}}`, want: portable.ErrMalformed, message: -1},
		{name: "slot messages before its key", doc: head + `{"plugin":"p","stored_messages":[]}],"totals":{"slots":1,"messages":0}}`, want: portable.ErrMalformed, message: -1},
		{name: "slot key twice", doc: head + `{"key":"h","plugin":"p","stored_messages":[]},{"key":"h","plugin":"p","stored_messages":[]}],"totals":{"slots":2,"messages":0}}`, want: portable.ErrMalformed, slot: "h", message: -1, inText: "twice"},
		{name: "slot member after messages", doc: head + `{"key":"h","stored_messages":[],"plugin":"p"}]}`, want: portable.ErrMalformed, slot: "h", message: -1},
		{
			name: "message fails message.json", want: portable.ErrInvalidMessage, slot: "b", message: 2, inText: "/role",
			doc: head + `{"key":"a","plugin":"p","stored_messages":[` + ok + `]},{"key":"b","plugin":"p","stored_messages":[` + ok + `,` + ok + `,{"role":"robot","contents":[]}]}],"totals":{"slots":2,"messages":4}}`,
		},
		{name: "message not JSON", doc: head + `{"key":"h","plugin":"p","stored_messages":[` + ok + `,{"role":]}]}`, want: portable.ErrMalformed, slot: "h", message: 1},
		{name: "totals missing", doc: head + `{"key":"h","plugin":"p","stored_messages":[` + ok + `]}]}`, want: portable.ErrTruncated, message: -1},
		{name: "cut short and closed", doc: head + `{"key":"h","plugin":"p","stored_messages":[` + ok + `]}],"totals":{"slots":1,"messages":2}}`, want: portable.ErrTruncated, message: -1, inText: "2 messages"},
		{name: "data after the document", doc: head + `],"totals":{"slots":0,"messages":0}} {}`, want: portable.ErrMalformed, message: -1},
		{
			name: "message over the limit", lim: portable.Limits{MaxMessageBytes: 100}, want: portable.ErrTooLarge, slot: "h", message: 1,
			doc: head + `{"key":"h","plugin":"p","stored_messages":[` + ok + `,{"role":"user","contents":[{"type":"text","text":"` + strings.Repeat("y", 200) + `"}]}]}]}`,
		},
		{
			name: "session over the limit", lim: portable.Limits{MaxSessionBytes: 100}, want: portable.ErrTooLarge, message: -1,
			doc: `{"format_version":"1.0","session":{"session_id":"` + strings.Repeat("s", 200) + `","revision":1},"slots":[]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := readAll([]byte(tt.doc), tt.lim)
			require.ErrorIs(t, err, tt.want)
			var pe *portable.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.slot, pe.Slot, "slot")
			assert.Equal(t, tt.message, pe.Message, "message index")
			assert.Contains(t, err.Error(), tt.inText)
			assert.LessOrEqual(t, strings.Count(err.Error(), "\n"), 1, "at most two lines")
		})
	}
}

// TestEveryPrefixIsTruncated: a document cut at any byte is refused as
// truncated, never read as a shorter history.
func TestEveryPrefixIsTruncated(t *testing.T) {
	doc := export(t, demoSession(), map[string][]abi.Message{"history": turns(4, 2), "audit": turns(1, 0)})
	doc = bytes.TrimRight(doc, "\n")
	for i := range len(doc) {
		_, _, _, err := readAll(doc[:i], portable.Limits{})
		require.ErrorIs(t, err, portable.ErrTruncated, "cut at byte %d of %d: %q", i, len(doc), doc[max(0, i-20):i])
	}
}

// TestUnreadSlotsAreChecked: a caller that does not range over a slot's
// messages still gets the error of a bad message in it.
func TestUnreadSlotsAreChecked(t *testing.T) {
	doc := head + `{"key":"a","plugin":"p","stored_messages":[` + ok + `,{"role":"user"}]},{"key":"b","plugin":"p","stored_messages":[]}],"totals":{"slots":2,"messages":1}}`
	r, err := portable.NewReader(strings.NewReader(doc), portable.Limits{})
	require.NoError(t, err)
	var keys []string
	var last error
	for sr, err := range r.Slots() {
		if err != nil {
			last = err
			break
		}
		keys = append(keys, sr.Key)
	}
	require.ErrorIs(t, last, portable.ErrInvalidMessage)
	var pe *portable.Error
	require.ErrorAs(t, last, &pe)
	assert.Equal(t, "a", pe.Slot)
	assert.Equal(t, 1, pe.Message)
	assert.Equal(t, []string{"a"}, keys)
}

func TestPages(t *testing.T) {
	history := turns(10, 0)
	doc := export(t, demoSession(), map[string][]abi.Message{"history": history})
	r, err := portable.NewReader(bytes.NewReader(doc), portable.Limits{})
	require.NoError(t, err)
	sizes := map[string][]int{}
	var got []abi.Message
	for sr, err := range r.Slots() {
		require.NoError(t, err)
		for page, err := range sr.Pages(4) {
			require.NoError(t, err)
			sizes[sr.Key] = append(sizes[sr.Key], len(page))
			if sr.Key == "history" {
				got = append(got, page...)
			}
		}
	}
	assert.Equal(t, map[string][]int{"history": {4, 4, 2}}, sizes)
	assert.Equal(t, history, got)
}

func TestWriterRefuses(t *testing.T) {
	bad := abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c"}}}
	tests := []struct {
		name    string
		write   func(w *portable.Writer) error
		want    error
		slot    string
		message int
	}{
		{"a slot the session lacks", func(w *portable.Writer) error { return w.BeginSlot("nope") }, portable.ErrIncomplete, "nope", -1},
		{"a slot twice", func(w *portable.Writer) error {
			_ = w.BeginSlot("audit")
			return w.BeginSlot("audit")
		}, portable.ErrIncomplete, "audit", -1},
		{"a slot left out", func(w *portable.Writer) error {
			_ = w.BeginSlot("audit")
			return w.Close()
		}, portable.ErrIncomplete, "", -1},
		{"a message before a slot", func(w *portable.Writer) error { return w.WriteMessage(abi.NewMessage(abi.RoleUser, "x")) }, portable.ErrIncomplete, "", -1},
		{"a message that fails message.json", func(w *portable.Writer) error {
			_ = w.BeginSlot("history")
			_ = w.WriteMessage(abi.NewMessage(abi.RoleUser, "x"))
			return w.WriteMessage(bad)
		}, portable.ErrInvalidMessage, "history", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := portable.NewWriter(&bytes.Buffer{}, demoSession())
			require.NoError(t, err)
			err = tt.write(w)
			require.ErrorIs(t, err, tt.want)
			var pe *portable.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.slot, pe.Slot)
			assert.Equal(t, tt.message, pe.Message)
			assert.ErrorIs(t, w.Close(), tt.want, "the Writer stays failed")
		})
	}
}

// TestDocumentsInTestdata: the documents schemas/portable-session.json
// accepts read, and the ones it refuses (testdata/invalid) are refused by
// the Reader too.
func TestDocumentsInTestdata(t *testing.T) {
	for _, dir := range []string{"testdata", "testdata/invalid"} {
		files, err := filepathGlob(dir + "/*.portable-session.json")
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		for _, f := range files {
			t.Run(f, func(t *testing.T) {
				doc := readFile(t, f)
				_, _, _, err := readAll(doc, portable.Limits{})
				if dir == "testdata" {
					require.NoError(t, err)
					return
				}
				require.Error(t, err)
				assert.True(t, errors.Is(err, portable.ErrMalformed) || errors.Is(err, portable.ErrInvalidMessage) || errors.Is(err, portable.ErrVersion), "%v", err)
			})
		}
	}
}
