package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// storedHistory is what 'history --json' printed: the roles and texts.
func storedHistory(t *testing.T, out string) []string {
	t.Helper()
	var r historyReport
	require.NoError(t, json.Unmarshal([]byte(out), &r), "history --json: %s", out)
	var got []string
	for _, m := range r.Messages {
		got = append(got, string(m.Role)+": "+m.TextContent())
	}
	return got
}

// TestStoreSQLite: chat with --store FILE.db keeps the session as a row of
// that SQLite file and, for the sqlite plugin, its history in the same
// file; a new process resumes it by id; history, session list, show and
// export read it through --store.
func TestStoreSQLite(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	args := []string{"chat", "--store", "sessions.db", "--session", "demo", "--plugin", "sqlite"}
	first := r.ok(t, append(args, "-m", "I like Italian food")...)
	assert.Contains(t, first, ", database sessions.db", "the plugin's rows go into the store's file")
	assert.Contains(t, first, "session: demo in SQLite sessions.db, revision 1")
	second := r.ok(t, append(args[:5], "-m", "What food do I like?")...)
	assert.Regexp(t, `(?m)^assistant: .*Italian`, second, "a new process did not remember")
	assert.Contains(t, second, "revision 2")
	assert.NoFileExists(t, filepath.Join(r.dir, "demo.json"), "a session file was written")

	st, err := sqlitestore.Open(filepath.Join(r.dir, "sessions.db"))
	require.NoError(t, err)
	s, err := st.Load(context.Background(), "demo")
	require.NoError(t, err)
	require.NoError(t, st.Close())
	assert.Equal(t, int64(2), s.Revision)
	abs, err := filepath.EvalSymlinks(r.dir)
	require.NoError(t, err)
	assert.Equal(t, "sqlite:"+filepath.Join(abs, "sessions.db"), s.Provenance["history"].Storage, "the session records its database")

	hist := storedHistory(t, r.ok(t, "history", "--store", "sessions.db", "--session", "demo", "--json"))
	require.Len(t, hist, 4, "history: %q", hist)
	assert.Equal(t, "user: I like Italian food", hist[0])
	assert.Equal(t, "user: What food do I like?", hist[2])

	list := r.ok(t, "session", "list", "--store", "sessions.db")
	assert.Regexp(t, `(?m)^demo\s+demo\s+2\s+history=sqlite`, list)
	show := r.ok(t, "session", "show", "--store", "sessions.db", "demo")
	assert.Contains(t, show, "4 messages stored in database sessions.db")
	exported := r.ok(t, "session", "export", "--raw", "--store", "sessions.db", "demo")
	back, err := session.Decode([]byte(exported))
	require.NoError(t, err)
	assert.Equal(t, s.Revision, back.Revision)
	r.ok(t, "session", "validate", "--store", "sessions.db", "demo")
}

// TestStoreDirectory: --store DIR keeps one file per session id, with a
// sql plugin's database beside it.
// TestConcurrentChatsOneSQLiteStore: many chats at once, each on its own
// session in one SQLite store (the plugin's rows in the same file), queue
// for the file's write lock: every one answers, or fails saying the
// database was busy; none is charged the wait as the plugin's time limit.
func TestConcurrentChatsOneSQLiteStore(t *testing.T) {
	t.Parallel()
	const chats = 24
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--store", "x.db", "--session", "first", "--plugin", "sqlite", "-m", "hello")
	var wg sync.WaitGroup
	results := make([]result, chats)
	for i := range chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = r.wasmhist(t, "chat", "--store", "x.db", "--session", fmt.Sprintf("s%d", i), "--plugin", "sqlite", "-m", "I like Italian food")
		}()
	}
	wg.Wait()
	answered := 0
	for i, res := range results {
		assert.NotContains(t, res.stderr, "resource_exhausted", "chat %d was charged the lock wait", i)
		if res.code == 0 {
			answered++
			continue
		}
		assert.Contains(t, res.stderr, "busy", "chat %d failed for another reason", i)
	}
	t.Logf("%d of %d chats answered", answered, chats)
	list := r.ok(t, "session", "list", "--store", "x.db")
	assert.Equal(t, answered+1, strings.Count(list, "history=sqlite"), "sessions stored:\n%s", list)
}

func TestStoreDirectory(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--store", "sessions/", "--session", "a", "--plugin", "sqlite", "-m", "I like Italian food")
	out := r.ok(t, "chat", "--store", "sessions", "--session", "a", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out)
	assert.FileExists(t, filepath.Join(r.dir, "sessions", "a.json"))
	assert.FileExists(t, filepath.Join(r.dir, "sessions", "a.db"))
	hist := storedHistory(t, r.ok(t, "history", "--store", "sessions", "--session", "a", "--json"))
	assert.Len(t, hist, 4)
}

// TestStorePostgres: with --store postgres the session lives in a real
// PostgreSQL server, whose connection string comes from the environment
// only; chat resumes it from a new process and history reads it.
func TestStorePostgres(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.DSN("postgres")
	r := invocation{dir: t.TempDir(), env: []string{postgresDSNEnv + "=" + dsn, "OTHER_DSN=" + dsn}}

	first := r.ok(t, "chat", "--store", "postgres", "--session", "pg", "-m", "I like Italian food")
	assert.Contains(t, first, "session: pg in PostgreSQL ($"+postgresDSNEnv+"), revision 1")
	assert.NotContains(t, first, dsn, "the connection string is printed")
	second := r.ok(t, "chat", "--store", "env:OTHER_DSN", "--session", "pg", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, second)
	hist := storedHistory(t, r.ok(t, "history", "--store", "postgres", "--session", "pg", "--json"))
	require.Len(t, hist, 4, "history: %q", hist)

	// A plugin keeping history in SQL gets the --db given.
	r.ok(t, "chat", "--store", "postgres", "--session", "pgsql", "--plugin", "sqlite", "--db", "h.db", "-m", "I like Italian food")
	out := r.ok(t, "chat", "--store", "postgres", "--session", "pgsql", "--db", "h.db", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out)
	// Without --db, a chat in a PostgreSQL store takes the SQLite file
	// the session records, as history does; when it is gone, the refusal
	// names it.
	out = r.ok(t, "chat", "--store", "postgres", "--session", "pgsql", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out)
	require.NoError(t, os.Rename(filepath.Join(r.dir, "h.db"), filepath.Join(r.dir, "h-moved.db")))
	r.failsWithOneLine(t, exitUsage, []string{"chat", "--store", "postgres", "--session", "pgsql", "-m", "hi"}, "h.db", "pass --db")
	assert.NoFileExists(t, filepath.Join(r.dir, "h.db"), "the refused chat made an empty database")
	require.NoError(t, os.Rename(filepath.Join(r.dir, "h-moved.db"), filepath.Join(r.dir, "h.db")))

	// A history kept in the store's own database (--db postgres) is found
	// again without --db, through the store's connection string.
	r.ok(t, "chat", "--store", "postgres", "--session", "inpg", "--plugin", "sqlite", "--db", "postgres", "-m", "I like Italian food")
	out = r.ok(t, "chat", "--store", "env:OTHER_DSN", "--session", "inpg", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out)
	hist = storedHistory(t, r.ok(t, "history", "--store", "env:OTHER_DSN", "--session", "inpg", "--json"))
	assert.Len(t, hist, 4, "history without --db")
	assert.Contains(t, r.ok(t, "session", "show", "--store", "postgres", "inpg"), "4 messages stored in database postgres")
	// A session file naming a PostgreSQL database is not given one by a
	// name alone ($WASMHIST_POSTGRES_DSN may reach another server's
	// database of that name): every command says which --db reaches it,
	// and none makes an SQLite file in its place.
	r.ok(t, "chat", "--session", "inpg.json", "--plugin", "sqlite", "--db", "postgres", "-m", "I like Italian food")
	for _, args := range [][]string{
		{"chat", "--session", "inpg.json", "-m", "hi"},
		{"history", "--session", "inpg.json"},
		{"session", "validate", "inpg.json"},
		{"session", "export", "inpg.json"},
	} {
		res := r.wasmhist(t, args...)
		assert.NotEqual(t, 0, res.code, "%v read a database the session named only by name", args)
		assert.Contains(t, res.stderr, "PostgreSQL database postgres: pass --db postgres", "%v", args)
		assert.NotContains(t, res.stderr+res.stdout, dsn)
	}
	res := r.wasmhist(t, "session", "show", "inpg.json")
	assert.Contains(t, res.stdout, "PostgreSQL database postgres: pass --db postgres", "session show says why it counted nothing")
	assert.NoFileExists(t, filepath.Join(r.dir, "inpg.db"), "an SQLite file was made in its place")
	out = r.ok(t, "chat", "--session", "inpg.json", "--db", "postgres", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out, "with --db postgres it resumes")

	st, err := pgstore.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Load(context.Background(), "pg")
	require.NoError(t, err)
	assert.Equal(t, int64(2), s.Revision)
	list := r.ok(t, "session", "list", "--store", "postgres")
	assert.Contains(t, list, "pgsql")
}

// TestStoreRefusesConnectionStrings: a connection string on the command
// line (or in a config file) is refused, saying where it goes instead; an
// empty variable is refused before any model call.
func TestStoreRefusesConnectionStrings(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"postgres://u:secret@db.example/h", "host=db user=u password=secret"} {
		line := invocation{}.failsWithOneLine(t, exitUsage, []string{"chat", "--store", spec, "-m", "hi"}, postgresDSNEnv, "--store postgres")
		assert.NotContains(t, line, "secret", "the refusal repeats the password")
		// Every command that reads a stored session says it once, with
		// its own advice only.
		for _, args := range [][]string{{"history", "--session", "a"}, {"session", "show", "a"}, {"session", "validate", "a"}, {"session", "export", "a"}} {
			cmd := strings.Join(args[:len(args)-1], " ")
			if args[0] == "history" {
				cmd = "history"
			}
			line := invocation{}.failsWithOneLine(t, exitUsage, append(args, "--store", spec), "--store postgres")
			assert.Equal(t, 1, strings.Count(line, "wasmhist "+cmd+":"), "the command is named twice: %s", line)
			assert.NotContains(t, line, "session list", "advice for a session the store does not hold")
			assert.NotContains(t, line, "secret", "the refusal repeats the password")
		}
	}
	base, calls := countingModel(t)
	invocation{env: []string{postgresDSNEnv + "="}}.failsWithOneLine(t, exitUsage,
		[]string{"chat", "--store", "postgres", "-m", "hi", "--model", "openai-chat", "--base-url", base}, "$"+postgresDSNEnv+" is empty")
	assert.Zero(t, calls.Load())
}

// TestDBAndSessionRefuseConnectionStrings: --db and --session refuse a
// connection string, from the command line or a configuration file, for
// every command that takes them, without repeating it and before writing
// anything: no output, no file, no session, names the password.
func TestDBAndSessionRefuseConnectionStrings(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3tpw"
	specs := map[string]string{
		"url":        "postgres://admin:" + secret + "@127.0.0.1/chat",
		"postgresql": "postgresql://admin:" + secret + "@db.example:5432/chat?sslmode=disable",
		"key=value":  "host=db user=admin password=" + secret,
		"user:pw@":   "admin:" + secret + "@db.example/chat",
	}
	commands := map[string][]string{
		"chat":             {"chat", "--plugin", "sqlite", "-m", "hi"},
		"chat with store":  {"chat", "--store", "sessions.db", "--plugin", "sqlite", "-m", "hi"},
		"history":          {"history"},
		"session validate": {"session", "validate", "x.json"},
	}
	for specName, spec := range specs {
		for cmdName, base := range commands {
			for _, flagName := range []string{"db", "session"} {
				if flagName == "db" && cmdName == "history" {
					base = append(slices.Clip(base), "--session", "s.json")
				}
				if flagName == "session" && cmdName == "session validate" {
					continue // takes the session as its argument
				}
				forms := map[string][]string{
					"separate": append(slices.Clip(base), "--"+flagName, spec),
					"joined":   append(slices.Clip(base), "--"+flagName+"="+spec),
				}
				for form, args := range forms {
					t.Run(specName+"/"+cmdName+"/"+flagName+"/"+form, func(t *testing.T) {
						t.Parallel()
						dir := t.TempDir()
						res := invocation{dir: dir}.wasmhist(t, args...)
						require.Equal(t, exitUsage, res.code, "stderr: %s\nstdout: %s", res.stderr, res.stdout)
						assert.Contains(t, res.stderr, "--"+flagName+" takes no connection string")
						if flagName == "db" {
							assert.Contains(t, res.stderr, "pass --db postgres", "the advice for a plugin's history in PostgreSQL")
						}
						assert.NotContains(t, res.stderr+res.stdout, secret, "the refusal repeats the password")
						assert.Empty(t, filesIn(t, dir), "files were written")
					})
				}
			}
		}
	}
	t.Run("config file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cfg := filepath.Join(t.TempDir(), "wasmhist.json")
		writeFile(t, cfg, `{"db": "postgres://admin:`+secret+`@127.0.0.1/chat"}`)
		res := invocation{dir: dir}.wasmhist(t, "chat", "--plugin", "sqlite", "--config-file", cfg, "-m", "hi")
		require.Equal(t, exitUsage, res.code, "stderr: %s", res.stderr)
		assert.Contains(t, res.stderr, `"db" in configuration file `+cfg+" takes no connection string")
		assert.NotContains(t, res.stderr+res.stdout, secret)
		assert.Empty(t, filesIn(t, dir), "files were written")
	})
	t.Run("parse error", func(t *testing.T) {
		t.Parallel()
		// A connection string given to a flag of another type is not
		// repeated by the parse error either.
		res := invocation{}.wasmhist(t, "chat", "--timeout", "postgres://admin:"+secret+"@h/db", "-m", "hi")
		require.Equal(t, exitUsage, res.code, "stderr: %s", res.stderr)
		assert.Contains(t, res.stderr, "-timeout")
		assert.NotContains(t, res.stderr+res.stdout, secret)
	})
}

// filesIn lists every file under dir.
func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && path != dir {
			files = append(files, path)
		}
		return err
	}))
	return files
}

// TestChatRefusesAnotherDatabase: a session chatted with --db X and
// resumed without --db, or with --db Y, neither holding its history, is
// refused before any model call, saying both databases and what to do;
// with --db X it resumes, and with a copy of X taken with the session too.
func TestChatRefusesAnotherDatabase(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--session", "chat.json", "--plugin", "sqlite", "--db", "x.db", "-m", "I like Italian food")
	base, calls := countingModel(t)
	for _, db := range [][]string{nil, {"--db", "y.db"}} {
		args := append([]string{"chat", "--session", "chat.json", "-m", "What food do I like?", "--model", "openai-chat", "--base-url", base}, db...)
		line := r.failsWithOneLine(t, exitFail, args, "holds none of its history", "x.db", "pass --db")
		assert.NotContains(t, line, "model settings")
	}
	assert.Zero(t, calls.Load(), "a model call was made for a refused resume")
	line := r.failsWithOneLine(t, exitFail, []string{"chat", "--session", "chat.json", "--db", "y.db", "--accept-new-build", "-m", "hi"}, "x.db")
	assert.Contains(t, line, "holds none of its history", "--accept-new-build does not accept a database that does not hold the session")
	out := r.ok(t, "chat", "--session", "chat.json", "--db", "x.db", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out)
	x, err := os.ReadFile(filepath.Join(r.dir, "x.db"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "c.db"), x, 0o600))
	out = r.ok(t, "chat", "--session", "chat.json", "--db", "c.db", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out, "a copy of the database holds the session")
}

// TestChatRefusesAnotherBuild: a session whose recorded sha256 is not the
// loaded plugin's is refused before any model call, naming both sums and
// --accept-new-build; with it the session resumes and records this build.
func TestChatRefusesAnotherBuild(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--session", "chat.json", "-m", "I like Italian food")
	path := filepath.Join(r.dir, "chat.json")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := session.Decode(b)
	require.NoError(t, err)
	real := s.Provenance["history"]
	require.Len(t, real.SHA256, 64, "the first chat recorded no sha256: %s", b)
	assert.Equal(t, "inmemory", real.Plugin)
	other := strings.Repeat("ab", 32)
	s.SetProvenance("history", session.Provenance{Plugin: real.Plugin, Version: real.Version, SHA256: other})
	b, err = session.Encode(s)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o600))

	base, calls := countingModel(t)
	line := r.failsWithOneLine(t, exitFail, []string{"chat", "--session", "chat.json", "-m", "hi", "--model", "openai-chat", "--base-url", base},
		"sha256 "+shortSum(other)+" then, "+shortSum(real.SHA256)+" now", "--accept-new-build")
	// A plugin author meets this on every rebuild: one short line, said
	// once, in the command's terms.
	assert.LessOrEqual(t, len(line), 200, "too long: %s", line)
	assert.Equal(t, 1, strings.Count(line, "build"+" of"), "said twice: %s", line)
	assert.NotContains(t, line, "AcceptNewBuild", "a Go API field: %s", line)
	assert.Zero(t, calls.Load(), "a model call was made for a refused resume")

	out := r.ok(t, "chat", "--session", "chat.json", "--accept-new-build", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, out)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	s, err = session.Decode(b)
	require.NoError(t, err)
	assert.Equal(t, real, s.Provenance["history"], "the upgrade did not record the loaded build")
	r.ok(t, "chat", "--session", "chat.json", "-m", "and now?")
}

// TestChatRetriesAStaleRevision: while chat waits for the model, another
// process commits the same session; chat's commit is then stale, so it
// reloads the session and runs the line again, with a note, and both
// turns are stored once each, in order. The same holds interactively and
// through --store.
func TestChatRetriesAStaleRevision(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		where []string
		stdin bool
	}{
		{"file/-m", []string{"--session", "chat.json"}, false},
		{"file/interactive", []string{"--session", "chat.json"}, true},
		{"sqlite store/-m", []string{"--store", "s.db", "--session", "chat"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := invocation{dir: t.TempDir(), env: []string{"OPENAI_API_KEY=" + testKey}}
			r.ok(t, append([]string{"chat", "-m", "first"}, tc.where...)...)
			srv := openaitest.NewServer(t)
			var once sync.Once
			var other result
			srv.Handle(func(openaitest.Request) openaitest.Reply {
				// The first call: another process commits meanwhile.
				once.Do(func() { other = r.wasmhist(t, append([]string{"chat", "-m", "meanwhile"}, tc.where...)...) })
				return openaitest.Text("answered")
			})
			args := append([]string{"chat", "--model", "openai-chat", "--base-url", srv.URL}, tc.where...)
			inv := r
			if tc.stdin {
				inv.stdin = "late\n"
			} else {
				args = append(args, "-m", "late")
			}
			res := inv.wasmhist(t, args...)
			require.Equal(t, 0, other.code, "the other process: %s", other.stderr)
			require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
			assert.Contains(t, res.stderr, "note: another process saved session", "no note about the retry")
			assert.Contains(t, res.stderr, "attempt 2 of 5")
			assert.Contains(t, res.stdout, "assistant: answered")
			assert.Contains(t, res.stdout, "revision 3")
			assert.Len(t, srv.Requests(), 2, "model calls")

			hist := storedHistory(t, r.ok(t, append([]string{"history", "--json"}, tc.where...)...))
			var users []string
			for _, m := range hist {
				if strings.HasPrefix(m, "user: ") {
					users = append(users, m)
				}
			}
			assert.Equal(t, []string{"user: first", "user: meanwhile", "user: late"}, users, "every turn once, in order")
		})
	}
}

// TestSessionArgumentsRefuseConnectionStrings: a session given as an
// argument (a file or, with --store, an id) is refused like --session when
// it looks like a connection string, without repeating it; so is an
// unknown subcommand that looks like one.
func TestSessionArgumentsRefuseConnectionStrings(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3tpw"
	spec := "postgres://admin:" + secret + "@127.0.0.1/chat"
	for name, args := range map[string][]string{
		"session show":          {"session", "show", spec},
		"session delete":        {"session", "delete", "--force", spec},
		"session export":        {"session", "export", spec},
		"session validate":      {"session", "validate", spec},
		"session show --store":  {"session", "show", "--store", "sessions.db", spec},
		"unknown subcommand":    {"session", spec},
		"session list with one": {"session", "list", "--store", "sessions.db", spec},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			res := invocation{dir: dir}.wasmhist(t, args...)
			require.Equal(t, exitUsage, res.code, "stderr: %s\nstdout: %s", res.stderr, res.stdout)
			assert.NotContains(t, res.stderr+res.stdout, secret, "the refusal repeats the password")
			assert.Empty(t, filesIn(t, dir), "files were written")
		})
	}
}
