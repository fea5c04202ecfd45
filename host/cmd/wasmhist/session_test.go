package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// inmemorySession is a session file whose history slot holds the inmemory
// plugin's state {"messages": [...]} as given.
func inmemorySession(id, state string) string {
	return `{"schema_version":1,"session_id":"` + id + `","revision":3,"state":{"history":{"provider":"inmemory","state_version":1,"data":` + state + `}}}`
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
}

func TestSessionValidateReadsState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}

	writeFile(t, filepath.Join(dir, "good.json"), inmemorySession("good",
		`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]},{"role":"assistant","contents":[{"type":"text","text":"hello"}]}]}`))
	out := r.ok(t, "session", "validate", "good.json")
	assert.Contains(t, out, "OK: good.json: session good")
	assert.Contains(t, out, "history: 2 stored messages read by plugin inmemory")

	writeFile(t, filepath.Join(dir, "schema.json"), inmemorySession("schema", `{"messages":{"role":"user"}}`))
	r.failsWithOneLine(t, exitFail, []string{"session", "validate", "schema.json"},
		"wasmhist session validate: schema.json", `slot "history"`, "/state/history/data", "state_schema", "/messages")

	writeFile(t, filepath.Join(dir, "wizard.json"), inmemorySession("wizard",
		`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]},{"role":"wizard","contents":[{"type":"text","text":"poof"}]}]}`))
	r.failsWithOneLine(t, exitFail, []string{"session", "validate", "wizard.json"},
		"wasmhist session validate: wizard.json", `slot "history"`, "messages[1]", "wizard")

	// A slot whose plugin is not built in is not checked, and the OK line
	// says so.
	writeFile(t, filepath.Join(dir, "third.json"), `{"schema_version":1,"session_id":"third","revision":1,"state":{"history":{"provider":"recent","state_version":1,"data":{}}}}`)
	out = r.ok(t, "session", "validate", "third.json")
	assert.Contains(t, out, "OK: third.json")
	assert.Contains(t, out, "history: state not checked: plugin recent not found; pass --plugin")

	// --plugin naming a plugin of no slot is a usage error.
	r.failsWithOneLine(t, exitUsage, []string{"session", "validate", "good.json", "--plugin", "sqlite"},
		`plugin "sqlite", which keeps no slot`)
}

func TestSessionValidateSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "chat.json", "-m", "I like tea")
	out := r.ok(t, "session", "validate", "chat.json")
	assert.Contains(t, out, "history: 2 stored messages read by plugin sqlite")

	// Without its database the session's history is not there.
	require.NoError(t, os.Rename(filepath.Join(dir, "chat.db"), filepath.Join(dir, "moved.db")))
	r.failsWithOneLine(t, exitFail, []string{"session", "validate", "chat.json"}, "chat.db", "does not exist", "--db")
	_, err := os.Stat(filepath.Join(dir, "chat.db"))
	assert.ErrorIs(t, err, os.ErrNotExist, "validate created the database")
	out = r.ok(t, "session", "validate", "chat.json", "--db", "moved.db")
	assert.True(t, strings.HasPrefix(out, "OK: chat.json"), out)
}

func TestSessionListAndShow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--session", "tea.json", "-m", "I like tea")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "coffee.json", "-m", "I like coffee")
	writeFile(t, filepath.Join(dir, "a.json"), `{"not": "a session"}`)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not json")

	out := r.ok(t, "session", "list")
	assert.Regexp(t, `(?m)^FILE +SESSION +REVISION +PLUGINS +MODIFIED$`, out)
	assert.Regexp(t, `(?m)^tea\.json +tea +1 +history=inmemory +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`, out)
	assert.Regexp(t, `(?m)^coffee\.json +coffee +1 +history=sqlite `, out)
	assert.Contains(t, out, "skipped 1: a.json (not a session)\n")
	assert.NotContains(t, out, "notes.txt")

	var l sessionListing
	require.NoError(t, json.Unmarshal([]byte(invocation{}.ok(t, "session", "list", "--json", dir)), &l))
	require.Len(t, l.Sessions, 2)
	assert.Equal(t, "coffee.json", l.Sessions[0].File)
	assert.Equal(t, []slotEntry{{Key: "history", Plugin: "sqlite", StateVersion: 1}}, l.Sessions[0].Slots)
	assert.Equal(t, []skippedFile{{File: "a.json", Reason: "not a session"}}, l.Skipped)

	out = r.ok(t, "session", "show", "tea.json")
	for _, w := range []string{"session:              tea\n", "revision:             1\n", "service conversation: none\n",
		"  history: plugin inmemory, state version 1, state ", " bytes, 2 messages stored\n"} {
		assert.Contains(t, out, w)
	}
	out = r.ok(t, "session", "show", "coffee.json")
	assert.Contains(t, out, "  history: plugin sqlite, state version 1, state ")
	assert.Contains(t, out, "2 messages stored in database coffee.db\n")

	r.failsWithOneLine(t, exitUsage, []string{"session", "list", "a", "b"}, "at most one DIR")
	r.failsWithOneLine(t, exitFail, []string{"session", "list", "nothere"}, "nothere", "check the path")
	r.failsWithOneLine(t, exitFail, []string{"session", "show", "a.json"}, "a.json is not a valid session")
	r.failsWithOneLine(t, exitUsage, []string{"session", "show"}, "want exactly one FILE")
}

func TestSessionExportImport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--session", "old.json", "-m", "I like <b>tea</b> & biscuits")
	r.ok(t, "chat", "--session", "old.json", "-m", "and jam")
	stored, err := os.ReadFile(filepath.Join(dir, "old.json"))
	require.NoError(t, err)

	exported := r.ok(t, "session", "export", "--raw", "old.json")
	require.Equal(t, string(stored), exported, "export is not the file as stored")

	out := invocation{dir: dir, stdin: exported}.ok(t, "session", "import", "new.json")
	assert.Contains(t, out, "imported session old (revision 2, state slots: history (inmemory, state version 1)) into new.json")
	imported, err := os.ReadFile(filepath.Join(dir, "new.json"))
	require.NoError(t, err)
	require.Equal(t, string(stored), string(imported), "import did not round-trip byte for byte")

	// The copy resumes with its history.
	out = r.ok(t, "chat", "--session", "new.json", "-m", "what do I like?")
	assert.Contains(t, out, "session: new.json (session old, revision 3)")
	hist := r.ok(t, "history", "--session", "new.json")
	assert.Contains(t, hist, "I like <b>tea</b> & biscuits")
	assert.Contains(t, hist, "what do I like?")
	assert.Contains(t, hist, "6 messages")

	// An existing file is refused, and with --force an older revision too.
	in := invocation{dir: dir, stdin: exported}
	in.failsWithOneLine(t, exitFail, []string{"session", "import", "new.json"}, "new.json exists", "--force")
	in.failsWithOneLine(t, exitFail, []string{"session", "import", "--force", "new.json"}, "at least as new", "revision 2", "its revision 3")
	newer := invocation{dir: dir, stdin: r.ok(t, "session", "export", "--raw", "new.json")}
	newer.ok(t, "session", "import", "--force", "old.json")
	assert.Contains(t, r.ok(t, "session", "show", "old.json"), "revision:             3\n")

	invocation{dir: dir, stdin: `{"schema_version": 1}`}.failsWithOneLine(t, exitFail, []string{"session", "import", "x.json"}, "standard input is not a valid session", "session_id")
	invocation{dir: dir}.failsWithOneLine(t, exitUsage, []string{"session", "import", "x.json"}, "nothing on standard input")
	_, err = os.Stat(filepath.Join(dir, "x.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	r.failsWithOneLine(t, exitFail, []string{"session", "export", "x.json"}, "x.json", "check the path")
}

// sqliteRows counts the rows of the sqlite plugin's tables in the database
// at path.
func sqliteRows(t *testing.T, path string) (sessions, messages int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sessions`).Scan(&sessions))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM messages`).Scan(&messages))
	return sessions, messages
}

func TestSessionDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	db := filepath.Join(dir, "shared.db")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "gone.json", "--db", "shared.db", "-m", "forget me")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "kept.json", "--db", "shared.db", "-m", "keep me")
	sessions, messages := sqliteRows(t, db)
	require.Equal(t, 2, sessions)
	require.Equal(t, 4, messages)

	// Without --db the database the session records is the one cleared.
	out := r.ok(t, "session", "delete", "gone.json")
	assert.Equal(t, "deleted gone.json (session gone, revision 1); cleared: history\n", out)
	assert.NoFileExists(t, filepath.Join(dir, "gone.json"))
	sessions, messages = sqliteRows(t, db)
	assert.Equal(t, 1, sessions, "session rows after delete")
	assert.Equal(t, 2, messages, "message rows after delete")
	assert.Contains(t, r.ok(t, "history", "--session", "kept.json", "--db", "shared.db"), "keep me")

	// A session started again under the deleted name starts empty.
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "gone.json", "--db", "shared.db", "-m", "new start")
	hist := r.ok(t, "history", "--session", "gone.json", "--db", "shared.db")
	assert.NotContains(t, hist, "forget me")
	assert.Contains(t, hist, "2 messages")

	r.failsWithOneLine(t, exitFail, []string{"session", "delete", "none.json"}, "none.json", "check the path")
	r.failsWithOneLine(t, exitUsage, []string{"session", "delete"}, "want exactly one FILE")
}

func TestSessionDeleteWithoutClear(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", brokenWasm, "--session", "b.json", "-m", "hi")
	r.failsWithOneLine(t, exitFail, []string{"session", "delete", "b.json", "--plugin", brokenWasm},
		"plugin broken does not implement clear", "would remain", "--force")
	require.FileExists(t, filepath.Join(dir, "b.json"))
	// Its plugin is not built in: delete says so rather than guess.
	r.failsWithOneLine(t, exitFail, []string{"session", "delete", "b.json"}, "plugin broken not found", "--plugin", "--force")

	out := r.ok(t, "session", "delete", "b.json", "--plugin", brokenWasm, "--force")
	assert.Contains(t, out, "deleted b.json")
	assert.Contains(t, out, "left as --force allowed")
	assert.NoFileExists(t, filepath.Join(dir, "b.json"))
}

func TestSessionSubcommandHelp(t *testing.T) {
	t.Parallel()
	top := invocation{}.ok(t, "session", "--help")
	for _, c := range sessionCommands() {
		assert.Contains(t, top, "  "+c.name+" "+c.args)
		out := invocation{}.ok(t, "session", c.name, "--help")
		assert.True(t, strings.HasPrefix(out, "Usage: wasmhist session "+c.name), "%s --help:\n%s", c.name, out)
		invocation{}.failsWithOneLine(t, exitUsage, []string{"session", c.name, "--bogus"}, "-bogus", "wasmhist session "+c.name+" --help")
	}
	invocation{}.failsWithOneLine(t, exitUsage, []string{"session", "rename"}, `unknown subcommand "rename"`, "validate, list, show, delete, export, import, fork")
}

// TestSessionRevisionBound: a session whose next commit would overflow
// its revision is refused by validate with the reason, and a chat on a
// session at the largest revision fails saying so, not blaming other
// processes for a stale revision.
func TestSessionRevisionBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	writeFile(t, filepath.Join(dir, "over.json"), `{"schema_version":1,"session_id":"over","revision":9223372036854775807}`)
	r.failsWithOneLine(t, exitFail, []string{"session", "validate", "over.json"},
		"over.json", "9223372036854775807 is past the largest revision, 9223372036854775806", "new session")

	writeFile(t, filepath.Join(dir, "last.json"), `{"schema_version":1,"session_id":"last","revision":9223372036854775806}`)
	assert.Contains(t, r.ok(t, "session", "validate", "last.json"), "OK: last.json")
	line := r.failsWithOneLine(t, exitFail, []string{"chat", "--session", "last.json", "-m", "hi"},
		"largest revision", "new session")
	assert.NotContains(t, line, "other processes")
	assert.NotContains(t, line, "-9223372036854775808")
}
