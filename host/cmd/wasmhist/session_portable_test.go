package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// historyTexts is the history of a session as "role: text" lines, read
// with history --json.
func historyTexts(t *testing.T, r invocation, args ...string) []string {
	t.Helper()
	var rep historyReport
	require.NoError(t, json.Unmarshal([]byte(r.ok(t, append([]string{"history", "--json"}, args...)...)), &rep))
	var out []string
	for _, m := range rep.Messages {
		out = append(out, string(m.Role)+": "+m.TextContent())
	}
	return out
}

// TestSessionExportImportCopies is the round trip the export's help
// promises: export | import of an sqlite-plugin session gives a copy
// with the same history in rows of its own; chatting on the copy never
// changes the original, and the original continues quietly (no warning,
// no session replaced).
func TestSessionExportImportCopies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		store  []string // where both sessions are; nil: files
		source string   // the original's FILE or id
		target []string // import's arguments
		copyAt []string // how history and chat name the copy
	}{
		{"files", nil, "ex.json", []string{"ex2.json"}, []string{"--session", "ex2.json"}},
		{"SQLite store, --as", []string{"--store", "sessions.db"}, "ex", []string{"--as", "ex2"}, []string{"--session", "ex2"}},
		{"directory store, --as", []string{"--store", "sessions"}, "ex", []string{"--as", "ex2"}, []string{"--session", "ex2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := invocation{dir: dir}
			orig := append(cloneArgs(tt.store), "--session", tt.source)
			chatArgs := func(at []string, msg string) []string {
				return append(append([]string{"chat", "--plugin", "sqlite"}, append(cloneArgs(tt.store), at...)...), "-m", msg)
			}
			r.ok(t, chatArgs(orig, "I like tea")...)
			r.ok(t, chatArgs(orig, "I like jam")...)
			want := historyTexts(t, r, orig...)
			require.Len(t, want, 4)

			doc := r.ok(t, append(append([]string{"session", "export"}, tt.store...), tt.source)...)
			out := invocation{dir: dir, stdin: doc}.ok(t, append(append([]string{"session", "import"}, tt.store...), tt.target...)...)
			assert.Contains(t, out, "4 messages")
			copyAt := append(cloneArgs(tt.store), tt.copyAt...)
			assert.Equal(t, want, historyTexts(t, r, copyAt...), "the copy's history")

			r.ok(t, chatArgs(copyAt, "I like figs")...)
			assert.Equal(t, want, historyTexts(t, r, orig...), "chatting on the copy changed the original")
			r.ok(t, chatArgs(orig, "what do I like?")...) // ok: no warning on standard error
			got := historyTexts(t, r, orig...)
			assert.Equal(t, append(want, "user: what do I like?", "assistant: You told me you like tea and you like jam."), got)
			assert.Len(t, historyTexts(t, r, copyAt...), 6, "chatting on the original changed the copy")
		})
	}
}

func cloneArgs(s []string) []string { return append([]string(nil), s...) }

// TestSessionImportRefusesAndReplaces: an existing session is refused
// without --force and left as it was; --force replaces it, history and
// all.
func TestSessionImportRefusesAndReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "a.json", "-m", "I like tea")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "b.json", "-m", "I like coffee")
	before, err := os.ReadFile(filepath.Join(dir, "b.json"))
	require.NoError(t, err)
	doc := invocation{dir: dir, stdin: r.ok(t, "session", "export", "a.json")}

	doc.failsWithOneLine(t, exitFail, []string{"session", "import", "b.json"}, "b.json already holds session a", "--force", "--as")
	after, err := os.ReadFile(filepath.Join(dir, "b.json"))
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "a refused import changed the file")
	assert.Equal(t, []string{"user: I like coffee", "assistant: Noted: you like coffee. I'll remember that."}, historyTexts(t, r, "--session", "b.json"))

	// b.json holds session b: importing session a over it is refused for
	// the file, whatever the id; --force replaces it.
	doc.ok(t, "session", "import", "--force", "b.json")
	assert.Equal(t, []string{"user: I like tea", "assistant: Noted: you like tea. I'll remember that."}, historyTexts(t, r, "--session", "b.json"))
}

// TestSessionImportMalformed: a document that is not whole and valid is
// refused with one line naming the cause and where, and nothing is
// written: no session file, no database.
func TestSessionImportMalformed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "a.json", "-m", "I like tea")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "a.json", "-m", "I like jam")
	doc := r.ok(t, "session", "export", "a.json")
	require.Contains(t, doc, `"format_version":"1.0"`)
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"cut short", doc[:len(doc)/2], []string{"document ends early", "export the session again"}},
		{"cut at the totals", strings.TrimSuffix(doc[:strings.LastIndex(doc, `"totals"`)], ",\n") + "}", []string{"document ends early", "totals missing"}},
		{"unknown version", strings.Replace(doc, `"format_version":"1.0"`, `"format_version":"9.0"`, 1), []string{"unknown format version", "9.0"}},
		{"a message that fails message.json", strings.Replace(doc, "\n"+`{"role":"assistant"`, "\n"+`{"role":"robot"`, 1), []string{"invalid message", `slot "history", message 1`}},
		{"not JSON", "hello", []string{"malformed document"}},
		{"totals that do not match", strings.Replace(doc, `"messages":4`, `"messages":5`, 1), []string{"say 1 slots and 5 messages"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := invocation{dir: dir, stdin: tt.doc}
			name := strings.ReplaceAll(tt.name, " ", "-")
			in.failsWithOneLine(t, exitFail, []string{"session", "import", name + ".json"}, append(tt.want, "nothing was imported")...)
			assert.NoFileExists(t, filepath.Join(dir, name+".json"))
			assert.NoFileExists(t, filepath.Join(dir, name+".db"))
		})
	}
}

// TestSessionFork: a fork at turn 2 of a 4-turn chat keeps 2 turns; the
// fork and its parent then continue independently.
func TestSessionFork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	for _, food := range []string{"tea", "jam", "figs", "rice"} {
		r.ok(t, "chat", "--plugin", "sqlite", "--session", "p.json", "-m", "I like "+food)
	}
	parent := historyTexts(t, r, "--session", "p.json")
	require.Len(t, parent, 8)

	out := r.ok(t, "session", "fork", "p.json", "b.json", "--at", "2")
	assert.Contains(t, out, "forked p.json (turns 1 to 2) into b.json")
	assert.Equal(t, parent[:4], historyTexts(t, r, "--session", "b.json"))

	assert.Contains(t, r.ok(t, "chat", "--session", "b.json", "-m", "what do I like?"), "You told me you like tea and you like jam.")
	assert.Contains(t, r.ok(t, "chat", "--session", "p.json", "-m", "what do I like?"), "You told me you like tea, you like jam, you like figs and you like rice.")
	assert.Len(t, historyTexts(t, r, "--session", "b.json"), 6)
	assert.Equal(t, parent, historyTexts(t, r, "--session", "p.json")[:8])
	assert.Len(t, historyTexts(t, r, "--session", "p.json"), 10)

	r.failsWithOneLine(t, exitFail, []string{"session", "fork", "p.json", "c.json", "--at", "9"}, "has 5, not 9", "nothing was written")
	assert.NoFileExists(t, filepath.Join(dir, "c.json"))
	r.failsWithOneLine(t, exitFail, []string{"session", "fork", "p.json", "b.json"}, "b.json already holds session b", "new name")
	r.failsWithOneLine(t, exitUsage, []string{"session", "fork", "p.json"}, "want SOURCE NEW")
}

// TestReadCommandsUseTheRecordedDatabase: after a chat with --db, the
// read commands find the history where the session records it, and none
// creates the default database beside the session.
func TestReadCommandsUseTheRecordedDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "pa.json", "--db", "A.db", "-m", "I like tea")

	hist := r.ok(t, "history", "--session", "pa.json")
	assert.Contains(t, hist, "I like tea")
	assert.Contains(t, hist, "2 messages")
	assert.Contains(t, r.ok(t, "session", "show", "pa.json"), "2 messages stored in database "+filepath.Join(dir, "A.db"))
	assert.Contains(t, r.ok(t, "session", "validate", "pa.json"), "history: 2 stored messages read by plugin sqlite")
	assert.Contains(t, r.ok(t, "session", "export", "pa.json"), "I like tea")
	assert.NoFileExists(t, filepath.Join(dir, "pa.db"), "a read command created the default database")

	// Moved together, the session and its database are found where they
	// are now.
	moved := filepath.Join(dir, "moved")
	require.NoError(t, os.Mkdir(moved, 0o755))
	for _, f := range []string{"pa.json", "A.db"} {
		require.NoError(t, os.Rename(filepath.Join(dir, f), filepath.Join(moved, f)))
	}
	assert.Contains(t, r.ok(t, "history", "--session", "moved/pa.json"), "I like tea")

	// Without the database, a read command says so and creates nothing.
	require.NoError(t, os.Remove(filepath.Join(moved, "A.db")))
	r.failsWithOneLine(t, exitFail, []string{"history", "--session", "moved/pa.json"}, "A.db", "does not exist", "--db")
	assert.NoFileExists(t, filepath.Join(moved, "A.db"))
	assert.NoFileExists(t, filepath.Join(moved, "pa.db"))
	assert.NoFileExists(t, filepath.Join(dir, "A.db"))
}

// TestSessionExportOpenAI: the history as a Chat Completions messages
// array, and back into a new session.
func TestSessionExportOpenAI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "a.json", "-m", "I like tea")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "a.json", "-m", "what time is it?")
	arr := r.ok(t, "session", "export", "--format", "openai", "a.json")
	var msgs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(arr), &msgs), arr)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, fmt.Sprint(m["role"]))
	}
	assert.Equal(t, []string{"user", "assistant", "user", "assistant", "tool", "assistant"}, roles)

	invocation{dir: dir, stdin: arr}.ok(t, "session", "import", "--format", "openai", "--plugin", "sqlite", "b.json")
	assert.Equal(t, historyTexts(t, r, "--session", "a.json"), historyTexts(t, r, "--session", "b.json"))
	assert.Contains(t, r.ok(t, "chat", "--session", "b.json", "-m", "what do I like?"), "tea")
}

// TestSessionExportWhileTheFileIsBehind: the session file is one chat
// behind its database (restored alone from a copy, as a process ending
// between the database's commit and the file's save leaves it). Export
// prints the revision the database committed, with its whole history,
// says so in one line on standard error, and writes nothing: the file
// stays as it was. The document imports into a copy holding that history.
func TestSessionExportWhileTheFileIsBehind(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		db   []string // --db; nil: the file's default SQLite database
	}{
		{"SQLite database", nil},
		{"PostgreSQL database", []string{"--db", "postgres"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := invocation{dir: t.TempDir()}
			if tt.db != nil {
				r.env = []string{postgresDSNEnv + "=" + pgtest.Start(t).DSN("postgres")}
			}
			file := filepath.Join(r.dir, "ex.json")
			chat := func(msg string) {
				r.ok(t, append(append([]string{"chat", "--plugin", "sqlite", "--session", "ex.json"}, tt.db...), "-m", msg)...)
			}
			chat("I like tea")
			behind, err := os.ReadFile(file)
			require.NoError(t, err)
			chat("I like jam")
			want := historyTexts(t, r, append([]string{"--session", "ex.json"}, tt.db...)...)
			require.Len(t, want, 4)
			require.NoError(t, os.WriteFile(file, behind, 0o600))

			res := r.wasmhist(t, append([]string{"session", "export", "ex.json"}, tt.db...)...)
			require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
			line, rest, _ := strings.Cut(res.stderr, "\n")
			assert.Empty(t, rest, "more than one line on standard error")
			assert.Contains(t, line, "exported revision 2, which its database holds: ex.json is at revision 1")
			var doc struct {
				Session struct{ Revision int64 }
			}
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &doc))
			assert.Equal(t, int64(2), doc.Session.Revision)
			now, err := os.ReadFile(file)
			require.NoError(t, err)
			assert.Equal(t, behind, now, "the export wrote the session file")

			invocation{dir: r.dir, env: r.env, stdin: res.stdout}.ok(t, append([]string{"session", "import", "ex2.json", "--as", "ex2"}, tt.db...)...)
			assert.Equal(t, want, historyTexts(t, r, append([]string{"--session", "ex2.json"}, tt.db...)...))
		})
	}
}

// TestSessionImportSlotsInAnyOrder: a document written by another tool
// whose slots are not in the order of their keys imports like one whose
// slots are, each slot's history into its own slot. The slots are still
// those the session's provenance names: one missing, or one more, is
// refused with nothing written.
func TestSessionImportSlotsInAnyOrder(t *testing.T) {
	t.Parallel()
	const (
		head  = `{"format_version":"1.0","session":{"session_id":"rev","revision":2,"provenance":{"history":{"plugin":"inmemory"},"notes":{"plugin":"inmemory"}}},"slots":[`
		notes = `{"key":"notes","plugin":"inmemory","stored_messages":[{"role":"user","contents":[{"type":"text","text":"window seat"}]}]}`
		hist  = `{"key":"history","plugin":"inmemory","stored_messages":[{"role":"user","contents":[{"type":"text","text":"Book a table for two"}]},
{"role":"assistant","contents":[{"type":"text","text":"Booked for 8 pm."}]}]}`
		other = `{"key":"other","plugin":"inmemory","stored_messages":[]}`
	)
	doc := func(totals string, slots ...string) string {
		return head + strings.Join(slots, ",\n") + `],"totals":` + totals + `}`
	}
	t.Run("reversed", func(t *testing.T) {
		r := invocation{dir: t.TempDir(), stdin: doc(`{"slots":2,"messages":3}`, notes, hist)}
		out := r.ok(t, "session", "import", "rev.json")
		assert.Contains(t, out, "imported session rev (revision 2, 3 messages")
		assert.Equal(t, []string{"user: Book a table for two", "assistant: Booked for 8 pm."}, historyTexts(t, r, "--session", "rev.json"))
		assert.Equal(t, []string{"user: window seat"}, historyTexts(t, r, "--session", "rev.json", "--state-key", "notes"))
	})
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		{"a slot missing", doc(`{"slots":1,"messages":1}`, notes), []string{`without slot "history"`}},
		{"a slot more", doc(`{"slots":3,"messages":3}`, notes, other, hist), []string{`slot "other", which the session's provenance does not name`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := invocation{dir: t.TempDir(), stdin: tt.doc}
			r.failsWithOneLine(t, exitFail, []string{"session", "import", "rev.json"}, append(tt.want, "nothing was imported")...)
			assert.NoFileExists(t, filepath.Join(r.dir, "rev.json"))
		})
	}
}
