package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// sqliteTables returns, for every table of the SQLite file (sqlite_schema
// lists the host's and the plugins'), "table: s" for each of strs a row's
// column holds.
func sqliteTables(t *testing.T, path string, strs ...string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table'`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Err())
	var found []string
	for _, tab := range tables {
		for _, s := range strs {
			var n int
			// Every column, as text: instr over the row's values.
			cols, err := db.Query(`SELECT name FROM pragma_table_info(?)`, tab)
			require.NoError(t, err)
			var names []string
			for cols.Next() {
				var c string
				require.NoError(t, cols.Scan(&c))
				names = append(names, `instr(CAST("`+c+`" AS TEXT), ?1) > 0`)
			}
			require.NoError(t, cols.Err())
			require.NoError(t, db.QueryRow(`SELECT count(*) FROM "`+tab+`" WHERE `+strings.Join(names, " OR "), s).Scan(&n))
			if n > 0 {
				found = append(found, tab+": "+s)
			}
		}
	}
	return found
}

// pgTables is sqliteTables for every table of every schema of a
// PostgreSQL database (information_schema).
func pgTables(t *testing.T, dsn string, strs ...string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	require.NoError(t, err)
	var tables []pgx.Identifier
	for rows.Next() {
		var sch, tab string
		require.NoError(t, rows.Scan(&sch, &tab))
		tables = append(tables, pgx.Identifier{sch, tab})
	}
	require.NoError(t, rows.Err())
	var found []string
	for _, tab := range tables {
		for _, s := range strs {
			var n int
			require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+tab.Sanitize()+` AS r WHERE strpos(r::text, $1) > 0`, s).Scan(&n))
			if n > 0 {
				found = append(found, strings.Join(tab, ".")+": "+s)
			}
		}
	}
	return found
}

// slotKey is the sqlite plugin's key of a session's rows.
func slotKey(t *testing.T, s *session.Session) string {
	t.Helper()
	var st struct {
		SessionKey string `json:"session_key"`
	}
	require.NoError(t, json.Unmarshal(s.State["history"].Data, &st))
	require.NotEmpty(t, st.SessionKey)
	return st.SessionKey
}

// TestSessionMigrateToPostgres: sessions chatted with the sqlite plugin in
// an SQLite store move to PostgreSQL (sessions and history) with one
// command; chat goes on there remembering what was said; a second run
// changes nothing; --db postgres keeps a new chat's history in PostgreSQL.
func TestSessionMigrateToPostgres(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.DSN("postgres")
	r := invocation{dir: t.TempDir(), env: []string{postgresDSNEnv + "=" + dsn}}
	for _, id := range []string{"a", "b", "c"} {
		r.ok(t, "chat", "--store", "sessions.db", "--session", id, "--plugin", "sqlite", "-m", "I like Italian food")
	}
	r.ok(t, "chat", "--store", "sessions.db", "--session", "b", "-m", "and pizza")

	out := r.ok(t, "session", "migrate", "--from", "sessions.db", "--to", "postgres")
	assert.Contains(t, out, "copied a (revision 1, 2 messages)")
	assert.Contains(t, out, "copied b (revision 2, 4 messages)")
	assert.Contains(t, out, "migrated 3 sessions from SQLite sessions.db to PostgreSQL ($"+postgresDSNEnv+"): 3 copied, 0 updated, 0 unchanged, 0 diverged")
	assert.NotContains(t, out, dsn)

	st, err := pgstore.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	b, err := st.Load(context.Background(), "b")
	require.NoError(t, err)
	assert.Equal(t, int64(2), b.Revision)
	assert.Equal(t, "postgres:postgres", b.Provenance["history"].Storage, "the history is in PostgreSQL")
	assert.NotEmpty(t, pgTables(t, dsn, slotKey(t, b)), "the plugin's rows are in PostgreSQL")

	again := r.ok(t, "session", "migrate", "--from", "sessions.db", "--to", "postgres")
	assert.Contains(t, again, "0 copied, 0 updated, 3 unchanged, 0 diverged")

	resumed := r.ok(t, "chat", "--store", "postgres", "--session", "b", "--db", "postgres", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Italian`, resumed)

	// A new chat on PostgreSQL from the start.
	r.ok(t, "chat", "--store", "postgres", "--session", "n", "--plugin", "sqlite", "--db", "env:"+postgresDSNEnv, "-m", "I like Thai food")
	n := r.ok(t, "chat", "--store", "postgres", "--session", "n", "--db", "postgres", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Thai`, n)
	ns, err := st.Load(context.Background(), "n")
	require.NoError(t, err)
	assert.Equal(t, "postgres:postgres", ns.Provenance["history"].Storage)
	assert.Contains(t, pgTables(t, dsn, slotKey(t, ns)), pgPluginSchema+".messages: "+slotKey(t, ns), "the messages are in the plugin's schema")

	r.failsWithOneLine(t, exitUsage, []string{"chat", "--store", "postgres", "--session", "m", "--plugin", "sqlite", "--db", "env:NO_SUCH_VAR", "-m", "hi"}, "$NO_SUCH_VAR is empty")
}

// TestSessionPruneLeavesNoRow: prune deletes the sessions last committed
// before the cutoff, says what it removed, and no table of the database
// holds their id or their rows' key afterwards; delete does the same for
// one session; younger sessions stay.
func TestSessionPruneLeavesNoRow(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	db := filepath.Join(r.dir, "sessions.db")
	for _, id := range []string{"old", "young", "gone"} {
		r.ok(t, "chat", "--store", "sessions.db", "--session", id, "--plugin", "sqlite", "-m", "I like Italian food")
	}
	st, err := sqlitestore.Open(db)
	require.NoError(t, err)
	load := func(id string) *session.Session {
		s, err := st.Load(context.Background(), id)
		require.NoError(t, err)
		return s
	}
	old, young, gone := load("old"), load("young"), load("gone")
	require.NoError(t, st.Close())
	oldTraces := []string{`"old"`, slotKey(t, old)}
	require.NotEmpty(t, sqliteTables(t, db, oldTraces...), "the scan finds the session before")

	// Two days ago, by the store's clock.
	raw, err := sql.Open("sqlite", db)
	require.NoError(t, err)
	_, err = raw.Exec(`UPDATE wasmhist_sessions SET updated_us = updated_us - 48*3600*1000000 WHERE id = 'old'`)
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	out := r.ok(t, "session", "prune", "--older-than", "1d", "--store", "sessions.db")
	assert.Contains(t, out, "deleted session old (revision 1); cleared: history (sqlite, rows in sqlite:"+db+")")
	assert.Contains(t, out, "pruned 1 sessions of SQLite sessions.db last committed before")
	assert.Empty(t, sqliteTables(t, db, oldTraces...), "rows of the pruned session remain")
	assert.NotEmpty(t, sqliteTables(t, db, slotKey(t, young)), "the young session's rows")

	r.ok(t, "session", "delete", "gone", "--store", "sessions.db")
	assert.Empty(t, sqliteTables(t, db, `"gone"`, slotKey(t, gone)), "rows of the deleted session remain")
	list := r.ok(t, "session", "list", "--store", "sessions.db")
	assert.Contains(t, list, "young")
	assert.NotContains(t, list, "old")

	for _, bad := range []string{"", "-1h", "soon", "0d"} {
		r.failsWithOneLine(t, exitUsage, []string{"session", "prune", "--older-than", bad, "--store", "sessions.db"}, "--older-than", "positive duration")
	}
}

// TestSessionMigrateFromDirectory: sessions of a directory store, each
// with its sqlite database beside it (more of them than the command keeps
// plugins loaded), and one of the in-memory plugin, move into an SQLite
// store with their history.
func TestSessionMigrateFromDirectory(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	var ids []string
	for i := range maxLoaded + 2 {
		id := fmt.Sprint("d", i)
		ids = append(ids, id)
		r.ok(t, "chat", "--store", "sessions/", "--session", id, "--plugin", "sqlite", "-m", "I like Italian food")
	}
	r.ok(t, "chat", "--store", "sessions/", "--session", "mem", "--plugin", "inmemory", "-m", "I like Thai food")
	out := r.ok(t, "session", "migrate", "--from", "sessions/", "--to", "all.db")
	assert.Contains(t, out, fmt.Sprintf("%d copied", len(ids)+1))
	for _, id := range ids {
		assert.Regexp(t, `(?m)^assistant: .*Italian`, r.ok(t, "chat", "--store", "all.db", "--session", id, "-m", "What food do I like?"), "session %s", id)
	}
	assert.Regexp(t, `(?m)^assistant: .*Thai`, r.ok(t, "chat", "--store", "all.db", "--session", "mem", "-m", "What food do I like?"))
}
