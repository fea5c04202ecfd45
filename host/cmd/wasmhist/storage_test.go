package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingModel is an OpenAI-compatible server that fails every call and
// counts them.
func countingModel(t *testing.T) (baseURL string, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, `{"error":{"message":"no"}}`, http.StatusInternalServerError)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/v1", calls
}

// TestStorageCheckedBeforeTheModel: storage that cannot work is refused
// with advice about the storage, before any model call is made.
func TestStorageCheckedBeforeTheModel(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.db")
	require.NoError(t, os.WriteFile(text, []byte("these are notes, not a database\n"), 0o644))
	readOnlyDB := filepath.Join(dir, "ro.db")
	require.NoError(t, os.WriteFile(readOnlyDB, []byte("SQLite format 3\x00 and the rest"), 0o444))
	readOnlySession := filepath.Join(dir, "ro.json")
	require.NoError(t, os.WriteFile(readOnlySession, []byte(`{"schema_version":1,"session_id":"ro","revision":0}`), 0o444))
	notADir := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(notADir, nil, 0o644))

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"db is a directory", []string{"--plugin", "sqlite", "--db", dir}, []string{"is a directory", "--db"}},
		{"db is not SQLite", []string{"--plugin", "sqlite", "--db", text}, []string{"is not an SQLite database"}},
		{"db is read-only", []string{"--plugin", "sqlite", "--db", readOnlyDB}, []string{"is read-only (mode 0444)", "chmod u+w"}},
		{"session file is read-only", []string{"--session", readOnlySession}, []string{"session file", "is read-only (mode 0444)"}},
		{"session directory cannot exist", []string{"--session", filepath.Join(notADir, "s.json")}, []string{"not a directory", "check the path"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, calls := countingModel(t)
			args := append([]string{"chat", "-m", "hi", "--model", "openai-chat", "--base-url", base}, tc.args...)
			line := invocation{}.failsWithOneLine(t, exitFail, args, tc.want...)
			assert.NotContains(t, line, "model settings", "the advice is about storage")
			assert.Zero(t, calls.Load(), "no model call before the storage is known good")
		})
	}
	fi, err := os.Stat(readOnlySession)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o444), fi.Mode().Perm(), "the read-only session file is left as it was")
}

// TestAdviceFitsThePlace: a model failure gets model advice, a plugin
// crash plugin advice.
func TestAdviceFitsThePlace(t *testing.T) {
	base, _ := countingModel(t)
	invocation{}.failsWithOneLine(t, exitFail, []string{"chat", "-m", "hi", "--model", "openai-chat", "--base-url", base},
		"the model call failed: check the model settings")
}

// TestCopiedSessionResumes: a session file copied under another name
// resumes, with its history, and the copy goes its own way.
func TestCopiedSessionResumes(t *testing.T) {
	dir := t.TempDir()
	inv := invocation{dir: dir}
	inv.ok(t, "chat", "--session", "chat.json", "-m", "I like Italian food")
	b, err := os.ReadFile(filepath.Join(dir, "chat.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "try.json"), b, 0o600))
	out := inv.ok(t, "chat", "--session", "try.json", "-m", "What food do I like?")
	assert.Contains(t, out, "Italian")
	assert.Contains(t, out, "try.json (session ")
	assert.Contains(t, out, "revision 2)")
}

// TestReadCommandsSeeADatabaseBehind: a session whose database was
// restored from a copy older than the session is refused by validate and
// export, as chat refuses it, saying which side is behind; history and
// session show read what the database holds, with a warning. With the
// copy taken with the session, all of them pass.
func TestReadCommandsSeeADatabaseBehind(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "a.json", "-m", "I like Rome")
	copyFile := func(from, to string) {
		b, err := os.ReadFile(filepath.Join(r.dir, from))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(r.dir, to), b, 0o600))
	}
	copyFile("a.db", "a1.db") // revision 1; the chat's commit left no -wal behind
	r.ok(t, "chat", "--session", "a.json", "-m", "I like Florence")
	copyFile("a.db", "a2.db")
	copyFile("a1.db", "a.db")

	behind := "holds its history at revision 1, the session is at 2: restore the database copy taken with the session"
	r.failsWithOneLine(t, exitFail, []string{"chat", "--session", "a.json", "-m", "hi"}, behind)
	r.failsWithOneLine(t, exitFail, []string{"session", "validate", "a.json"}, "not a session chat can resume", behind)
	for _, args := range [][]string{{"session", "export", "a.json"}, {"session", "export", "--format", "openai", "a.json"}} {
		res := r.wasmhist(t, args...)
		assert.Equal(t, exitFail, res.code, "%v: %s", args, res.stderr)
		assert.Contains(t, res.stderr, behind)
		assert.Empty(t, res.stdout, "%v exported the older history", args)
	}
	for _, args := range [][]string{{"history", "--session", "a.json"}, {"session", "show", "a.json"}} {
		res := r.wasmhist(t, args...)
		require.Equal(t, 0, res.code, "%v: %s", args, res.stderr)
		assert.Contains(t, res.stderr, "warning: ")
		assert.Contains(t, res.stderr, behind)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(res.stderr), "\n")+1, "one line")
	}

	copyFile("a2.db", "a.db")
	assert.Contains(t, r.ok(t, "session", "validate", "a.json"), "OK: ")
	assert.Len(t, storedHistory(t, r.ok(t, "history", "--session", "a.json", "--json")), 4)
	r.ok(t, "session", "show", "a.json")
	r.ok(t, "session", "export", "a.json")

	// With the database gone, show says so and makes none.
	require.NoError(t, os.Rename(filepath.Join(r.dir, "a.db"), filepath.Join(r.dir, "gone.db")))
	res := r.wasmhist(t, "session", "show", "a.json")
	assert.Contains(t, res.stdout, "messages not counted")
	assert.NotContains(t, res.stderr, "warning", "a missing database taken for one behind")
	assert.NoFileExists(t, filepath.Join(r.dir, "a.db"), "session show created the database")
}

// TestChatOnASessionFileBehindItsDatabase: a session file restored from a
// copy older than its database is brought up to date from the database's
// journal, and the message runs on that: one note says so, blaming no
// other process, and nothing of the history is lost or stored twice.
func TestChatOnASessionFileBehindItsDatabase(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "a.json", "-m", "I like Rome")
	old, err := os.ReadFile(filepath.Join(r.dir, "a.json"))
	require.NoError(t, err)
	r.ok(t, "chat", "--session", "a.json", "-m", "I like Florence")
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "a.json"), old, 0o600))

	res := r.wasmhist(t, "chat", "--session", "a.json", "-m", "What do I like?")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Regexp(t, `(?m)^assistant: .*Rome.*Florence`, res.stdout)
	assert.Equal(t, "wasmhist chat: note: session file a.json was at revision 1, its database at 2 (a chat ended before saving the session, or it was restored from an older copy): it was brought up to date; running the message again (attempt 2 of 5)\n", res.stderr)
	assert.Len(t, storedHistory(t, r.ok(t, "history", "--session", "a.json", "--json")), 6)
}
