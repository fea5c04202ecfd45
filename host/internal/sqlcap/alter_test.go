package sqlcap

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// createHostTables has the host write its session and journal rows into
// path, as a run's commit does.
func createHostTables(t *testing.T, s *Store, path string) {
	t.Helper()
	ctx := context.Background()
	target, err := txn.SQLiteTarget(path)
	require.NoError(t, err)
	tx := txn.New()
	c := beginIn(t, s, path, tx)
	c.must(ctx, "INSERT INTO t (b) VALUES ('by a run')")
	c.end(ctx, true)
	require.NoError(t, tx.Put(ctx, target, txn.Sessions, "s", 1, []byte(`{}`)))
	require.NoError(t, tx.Put(ctx, target, txn.Journal, "s", 1, []byte(`{}`)))
	require.NoError(t, tx.Commit(ctx))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// schemaOf reads the names and SQL of path's schema objects directly,
// outside the capability.
func schemaOf(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query("SELECT name, coalesce(sql, '') FROM sqlite_schema")
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, q string
		require.NoError(t, rows.Scan(&name, &q))
		out[name] = q
	}
	require.NoError(t, rows.Err())
	return out
}

// TestAlterOwnTables: a plugin alters its own tables as SPEC 8.2 says,
// with indexes, triggers and views that name them, and virtual tables.
func TestAlterOwnTables(t *testing.T) {
	tests := []struct {
		name  string
		alter string
		check string // a statement that works only after the change
	}{
		{"rename table", "ALTER TABLE t RENAME TO u", "SELECT a, b, c FROM u"},
		{"rename column", "ALTER TABLE t RENAME COLUMN b TO bb", "SELECT a, bb, c FROM t"},
		{"drop column", "ALTER TABLE t DROP COLUMN c", "SELECT count(*) FROM pragma_table_info('t') HAVING count(*) = 2"},
		{"add column", "ALTER TABLE t ADD COLUMN d TEXT DEFAULT 'x'", "SELECT d FROM t"},
		{"rename table named in quotes", `ALTER TABLE "t" RENAME TO "my table"`, `SELECT a FROM "my table"`},
		{"rename virtual table", "ALTER TABLE f RENAME TO g", "SELECT * FROM g WHERE g MATCH 'hello'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, Limits{})
			p := dbPath(t, "a.db")
			oneCall(t, s, p,
				"CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT, c TEXT)",
				"CREATE INDEX tb ON t(b)",
				"CREATE TRIGGER tt AFTER INSERT ON t BEGIN UPDATE t SET b = upper(b) WHERE a = new.a; END",
				"CREATE VIEW v AS SELECT a, b FROM t",
				"CREATE VIRTUAL TABLE f USING fts5(body)",
				"INSERT INTO t (b, c) VALUES ('x', 'y')",
				"INSERT INTO f (body) VALUES ('hello world')")
			oneCall(t, s, p, tt.alter)
			oneCall(t, s, p, tt.check)
			checkIntegrity(t, p)
		})
	}
}

// TestAlterRefusals: nothing alters a host table or renames a table into
// the host's names, and each refusal names the object it is about. A
// refused rename has run, so the whole call rolls back.
func TestAlterRefusals(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		host   bool // the host's tables exist beforehand
		ran    bool // the statement ran before it could be refused
		alter  string
		reason string // in the message
		absent string // a name the file must not hold afterwards
	}{
		{"rename into the sessions table", false, true, "ALTER TABLE t RENAME TO wasmhist_sessions", `a table cannot be renamed to "wasmhist_sessions"`, "wasmhist_sessions"},
		{"rename into the prefix in capitals", false, true, "ALTER TABLE t RENAME TO WASMHIST_Journal", `a table cannot be renamed to "wasmhist_journal"`, "WASMHIST_Journal"},
		{"rename in a string of statements", false, true, "SELECT 1; ALTER TABLE t RENAME TO wasmhist_x", `renamed to "wasmhist_x"`, "wasmhist_x"},
		{"rename a virtual table into the prefix", false, true, "ALTER TABLE f RENAME TO wasmhist_f", `renamed to "wasmhist_f`, "wasmhist_f"},
		{"rename a host table", true, false, "ALTER TABLE wasmhist_sessions RENAME TO mine", `"wasmhist_sessions" is not accessible`, "mine"},
		{"rename a host table's column", true, false, "ALTER TABLE wasmhist_sessions RENAME COLUMN data TO d", `"wasmhist_sessions" is not accessible`, ""},
		{"drop a host table's column", true, false, "ALTER TABLE wasmhist_sessions DROP COLUMN data", `"wasmhist_sessions" is not accessible`, ""},
		{"add a column to a host table", true, false, "ALTER TABLE wasmhist_sessions ADD COLUMN x", `"wasmhist_sessions" is not accessible`, ""},
		{"create a virtual table in the prefix", false, false, "CREATE VIRTUAL TABLE wasmhist_v USING fts5(a)", `"wasmhist_v" is not accessible`, "wasmhist_v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, Limits{})
			p := dbPath(t, "a.db")
			oneCall(t, s, p, "CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)", "CREATE VIRTUAL TABLE f USING fts5(body)")
			if tt.host {
				createHostTables(t, s, p)
			}
			before := schemaOf(t, p)
			c := begin(t, s, p)
			c.must(ctx, "INSERT INTO t (b) VALUES ('written before')")
			_, err := c.do(ctx, req(tt.alter))
			require.ErrorIs(t, err, abi.ErrPermissionDenied)
			assert.ErrorContains(t, err, tt.reason)
			assert.NotContains(t, err.Error(), "temp", "the refusal names the wrong object")
			// A rename the authorizer could not see before it ran fails
			// the whole call, even if the plugin reports success; a
			// statement refused before it ran fails alone, as any
			// refused statement does.
			endErr := c.call.End(ctx, true)
			if tt.ran {
				assert.Error(t, endErr)
			} else {
				assert.NoError(t, endErr)
			}
			after := schemaOf(t, p)
			assert.Equal(t, before, after, "the schema changed")
			if tt.absent != "" {
				assert.NotContains(t, after, tt.absent)
			}
			resp := oneCall(t, s, p, "SELECT count(*) FROM t WHERE b = 'written before'")
			kept := `[[1]]`
			if tt.ran {
				kept = `[[0]]`
			}
			assert.JSONEq(t, kept, string(mustJSON(t, resp.Results[0].Rows)), "the call's earlier insert")
			checkIntegrity(t, p)
		})
	}
}
