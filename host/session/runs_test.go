package session_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
)

const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// reply is a JSON array of one assistant message whose text pads it to n
// bytes.
func reply(n int) json.RawMessage {
	const frame = `[{"role":"assistant","contents":[{"type":"text","text":""}]}]`
	return json.RawMessage(strings.Replace(frame, `"text":""`, `"text":"`+strings.Repeat("x", n-len(frame))+`"`, 1))
}

func ids(s *session.Session) []string {
	var out []string
	for _, r := range s.RecentRuns {
		out = append(out, r.RunID)
	}
	return out
}

// RecordRun keeps the last MaxRecentRuns ids, newest last, moves a
// recorded id to the end, and drops the oldest replies beyond
// MaxRecentReplyBytes; what it keeps always encodes.
func TestRecordRunWindow(t *testing.T) {
	s := session.New()
	for i := range session.MaxRecentRuns + 1 {
		s.RecordRun(session.RunRecord{RunID: fmt.Sprint("r", i), InputSHA256: digest, Revision: int64(i + 1)})
	}
	require.Len(t, s.RecentRuns, session.MaxRecentRuns)
	assert.Nil(t, s.FindRun("r0"), "the 65th-newest id is forgotten")
	assert.NotNil(t, s.FindRun("r1"), "the 64th-newest id is kept")

	before := s.RecentRuns
	s.RecordRun(session.RunRecord{RunID: "r1", InputSHA256: digest, Revision: 99})
	assert.Equal(t, "r1", before[0].RunID, "RecordRun replaces the slice, never writes into it")
	assert.Len(t, s.RecentRuns, session.MaxRecentRuns)
	assert.Equal(t, "r1", ids(s)[len(s.RecentRuns)-1], "a repeated id moves to the end")
	assert.EqualValues(t, 99, s.FindRun("r1").Revision)
	_, err := session.Encode(s)
	require.NoError(t, err)

	// Replies: the newest fit; an older one that does not is dropped, its
	// id kept; a reply larger than the whole budget is dropped at once.
	third := session.MaxRecentReplyBytes / 3
	r := session.New()
	for i := range 4 {
		r.RecordRun(session.RunRecord{RunID: fmt.Sprint("a", i), InputSHA256: digest, Revision: int64(i + 1), Reply: reply(third)})
	}
	assert.True(t, r.FindRun("a0").ReplyDropped)
	assert.Nil(t, r.FindRun("a0").Reply)
	for _, id := range []string{"a1", "a2", "a3"} {
		assert.False(t, r.FindRun(id).ReplyDropped, id)
		assert.Len(t, r.FindRun(id).Reply, third, id)
	}
	r.RecordRun(session.RunRecord{RunID: "big", InputSHA256: digest, Revision: 5, Reply: reply(session.MaxRecentReplyBytes + 1)})
	assert.True(t, r.FindRun("big").ReplyDropped)
	assert.False(t, r.FindRun("a1").ReplyDropped, "a dropped big reply leaves room for the older ones")
	b, err := session.Encode(r)
	require.NoError(t, err)
	back, err := session.Decode(b)
	require.NoError(t, err)
	assert.Equal(t, r.RecentRuns, back.RecentRuns)

	c := r.Clone()
	c.RecentRuns[1].Reply[2] = 'X'
	assert.Equal(t, byte('{'), r.RecentRuns[1].Reply[1], "Clone shares reply bytes")
}

// Decode refuses a window the host would never write, saying where.
func TestDecodeRefusesABadWindow(t *testing.T) {
	run := func(id string, extra string) string {
		return fmt.Sprintf(`{"run_id":%q,"input_sha256":%q,"revision":1%s}`, id, digest, extra)
	}
	doc := func(runs ...string) string {
		return `{"schema_version":1,"session_id":"s","revision":1,"recent_runs":[` + strings.Join(runs, ",") + `]}`
	}
	many := make([]string, session.MaxRecentRuns+1)
	for i := range many {
		many[i] = run(fmt.Sprint("r", i), "")
	}
	third := session.MaxRecentReplyBytes/3 + 1
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"more than the window", doc(many...), "at /recent_runs"},
		{"an id twice", doc(run("r", ""), run("r", "")), `at /recent_runs/1: run id "r" recorded twice`},
		{"replies beyond the budget", doc(run("a", `,"reply":`+string(reply(third))), run("b", `,"reply":`+string(reply(third))), run("c", `,"reply":`+string(reply(third)))), "at /recent_runs: replies of"},
		{"no digest", doc(`{"run_id":"r","revision":1}`), "input_sha256"},
		{"short digest", doc(`{"run_id":"r","input_sha256":"abc","revision":1}`), "at /recent_runs/0/input_sha256"},
		{"empty id", doc(run("", "")), "at /recent_runs/0/run_id"},
		{"id over 256 bytes", doc(run(strings.Repeat("i", 257), "")), "at /recent_runs/0/run_id"},
		{"reply not an array of objects", doc(run("r", `,"reply":["hi"]`)), "at /recent_runs/0/reply/0"},
		{"reply and dropped", doc(run("r", `,"reply":[],"reply_dropped":true`)), "at /recent_runs/0"},
		{"revision 0", doc(`{"run_id":"r","input_sha256":"` + digest + `","revision":0}`), "at /recent_runs/0/revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := session.Decode([]byte(tt.doc))
			require.ErrorIs(t, err, session.ErrInvalid)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	_, err := session.Decode([]byte(doc(many[:session.MaxRecentRuns]...)))
	require.NoError(t, err, "a full window")
}

// TestDecodeReadsLastRunID: a session written before recent_runs, with
// last_run_id, still loads; its last run is recognised with any input and
// no reply, and is written back in recent_runs only.
func TestDecodeReadsLastRunID(t *testing.T) {
	s, err := session.Decode([]byte(`{"schema_version":1,"session_id":"s","revision":3,"last_run_id":"r3"}`))
	require.NoError(t, err)
	rec := s.FindRun("r3")
	require.NotNil(t, rec, "the last run is recognised")
	assert.Equal(t, session.RunRecord{RunID: "r3", Revision: 3, ReplyDropped: true}, *rec)
	b, err := session.Encode(s)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "last_run_id")
	again, err := session.Decode(b)
	require.NoError(t, err)
	assert.Equal(t, s.RecentRuns, again.RecentRuns)

	_, err = session.Decode([]byte(`{"schema_version":1,"session_id":"s","revision":0,"last_run_id":"r"}`))
	require.ErrorIs(t, err, session.ErrInvalid, "a run committed at revision 0")
}
