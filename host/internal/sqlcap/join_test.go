package sqlcap

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// beginIn is begin with the call joining tx.
func beginIn(t testing.TB, s *Store, path string, tx *txn.Txn) *testCall {
	ctx := txn.With(context.Background(), tx)
	return &testCall{t: t, call: capability.NewCall(ctx, "test", []capability.Grant{NewGrant(FixedPath(path), Limits{})}, backendsOf(s))}
}

func count(t *testing.T, s *Store, p string) string {
	return string(oneCall(t, s, p, "SELECT count(*) FROM t").Results[0].Rows[0][0])
}

// TestTxnSpansCalls: the calls of one txn.Txn commit together with the
// host's row, a failed later call undoes only its own part, a rollback
// undoes every call, and a call that only read leaves the Txn at once.
func TestTxnSpansCalls(t *testing.T) {
	ctx := txn.With(context.Background(), txn.New())
	s := newStore(t, Limits{})
	p := dbPath(t, "txn.db")
	oneCall(t, s, p, "CREATE TABLE t(x INTEGER)")
	target, err := txn.SQLiteTarget(p)
	require.NoError(t, err)

	tx := txn.New()
	read := beginIn(t, s, p, tx)
	read.must(ctx, "SELECT count(*) FROM t")
	read.end(ctx, true)
	assert.Empty(t, tx.Targets(), "a call that only read holds no transaction")

	first := beginIn(t, s, p, tx)
	first.must(ctx, "INSERT INTO t VALUES (1)")
	first.end(ctx, true)
	require.Equal(t, []string{target}, tx.Targets())
	assert.Equal(t, "0", count(t, s, p), "a write of the Txn is visible before its commit")

	failed := beginIn(t, s, p, tx)
	failed.must(ctx, "INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (3)")
	failed.end(ctx, false)

	later := beginIn(t, s, p, tx)
	later.must(ctx, "INSERT INTO t VALUES (4)")
	later.end(ctx, true)

	require.NoError(t, tx.Put(ctx, target, txn.Sessions, "s1", 1, []byte(`{"revision":1}`)))
	require.ErrorIs(t, tx.Put(ctx, target, txn.Sessions, "s1", 1, []byte(`{}`)), txn.ErrStale, "the same revision again")
	rev, data, err := tx.Get(ctx, target, txn.Sessions, "s1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, rev)
	assert.JSONEq(t, `{"revision":1}`, string(data))
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, "2", count(t, s, p), "rows 1 and 4, not the failed call's")
	assert.Empty(t, tx.Targets(), "a committed Txn is empty")

	// The Txn serves the next unit: a rollback undoes its calls and its
	// host rows.
	again := beginIn(t, s, p, tx)
	again.must(ctx, "INSERT INTO t VALUES (5)")
	again.end(ctx, true)
	require.NoError(t, tx.Put(ctx, target, txn.Sessions, "s1", 2, []byte(`{"revision":2}`)))
	require.NoError(t, tx.Rollback(ctx))
	assert.Equal(t, "2", count(t, s, p))
	check := beginIn(t, s, p, tx)
	check.must(ctx, "INSERT INTO t VALUES (6)")
	check.end(ctx, true)
	rev, _, err = tx.Get(ctx, target, txn.Sessions, "s1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, rev, "the rolled-back row")
	require.NoError(t, tx.Rollback(ctx))
	checkIntegrity(t, p)
}

// TestHostTablesOutOfReach: a plugin's statements cannot read, write,
// index, hook or rename the host's tables in its own file.
func TestHostTablesOutOfReach(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{})
	p := dbPath(t, "host.db")
	oneCall(t, s, p, "CREATE TABLE t(x INTEGER)")
	target, err := txn.SQLiteTarget(p)
	require.NoError(t, err)
	tx := txn.New()
	c := beginIn(t, s, p, tx)
	c.must(ctx, "INSERT INTO t VALUES (1)")
	c.end(ctx, true)
	require.NoError(t, tx.Put(ctx, target, txn.Sessions, "victim", 1, []byte(`{"secret":true}`)))
	require.NoError(t, tx.Put(ctx, target, txn.Journal, "victim", 1, []byte(`{"secret":true}`)))
	require.NoError(t, tx.Commit(ctx))

	for _, q := range []string{
		"SELECT * FROM wasmhist_sessions",
		"SELECT data FROM WASMHIST_JOURNAL",
		"INSERT INTO wasmhist_journal VALUES ('victim', 9, 0, '{}')",
		"UPDATE wasmhist_sessions SET revision = 0",
		"DELETE FROM wasmhist_journal",
		"DROP TABLE wasmhist_sessions",
		"ALTER TABLE wasmhist_sessions RENAME TO mine",
		"CREATE INDEX i ON wasmhist_sessions(data)",
		"CREATE TRIGGER tr AFTER INSERT ON wasmhist_sessions BEGIN DELETE FROM t; END",
		"CREATE TABLE wasmhist_fake(x)",
	} {
		t.Run(q, func(t *testing.T) {
			c := begin(t, s, p)
			_, err := c.do(ctx, req(q))
			c.end(ctx, true)
			require.ErrorIs(t, err, abi.ErrPermissionDenied)
		})
	}
	// A view or a trigger naming a host table can be created (SQLite
	// authorizes what they do when they run), but it runs with the
	// plugin's rights and is refused.
	oneCall(t, s, p, "CREATE VIEW v AS SELECT * FROM wasmhist_sessions",
		"CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE wasmhist_sessions SET data = '{}'; END")
	for _, q := range []string{"SELECT * FROM v", "INSERT INTO t VALUES (7)"} {
		c := begin(t, s, p)
		_, err := c.do(ctx, req(q))
		c.end(ctx, true)
		require.ErrorIs(t, err, abi.ErrPermissionDenied, q)
	}
	oneCall(t, s, p, "DROP VIEW v", "DROP TRIGGER tr")
	tx2 := txn.New()
	c = beginIn(t, s, p, tx2)
	c.must(ctx, "INSERT INTO t VALUES (2)")
	c.end(ctx, true)
	_, data, err := tx2.Get(ctx, target, txn.Sessions, "victim")
	require.NoError(t, err)
	assert.JSONEq(t, `{"secret":true}`, string(data), "the host's row as written")
	require.NoError(t, tx2.Rollback(ctx))
	checkIntegrity(t, p)
}

// TestTxnLockWithoutWrite: a call of a Txn that took the write lock
// (a write batch) and changed nothing leaves the Txn at once, as a call
// that only read does, so no lock is held across what follows; one that
// changed rows, the schema or a header version stays in it.
func TestTxnLockWithoutWrite(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{})
	p := dbPath(t, "lock.db")
	oneCall(t, s, p, "CREATE TABLE t(x INTEGER)")
	tests := []struct {
		name    string
		stmts   []string
		pending bool
	}{
		{"write batch that reads", []string{"SELECT 1", "SELECT count(*) FROM t"}, false},
		{"write that changes no row", []string{"DELETE FROM t WHERE x = 42"}, false},
		{"insert", []string{"INSERT INTO t VALUES (1)"}, true},
		{"create table", []string{"CREATE TABLE IF NOT EXISTS u(x)"}, true},
		{"user version", []string{"PRAGMA user_version = 7"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx := txn.New()
			c := beginIn(t, s, p, tx)
			req := abi.SQLRequest{Write: true}
			for _, q := range tt.stmts {
				req.Statements = append(req.Statements, abi.SQLStatement{SQL: q})
			}
			_, err := c.do(ctx, req)
			require.NoError(t, err)
			c.end(ctx, true)
			if !tt.pending {
				assert.Empty(t, tx.Targets(), "the call holds the write lock with nothing written")
				// Another writer gets the lock at once.
				oneCall(t, s, p, "INSERT INTO t VALUES (0)", "DELETE FROM t WHERE x = 0")
				return
			}
			require.Len(t, tx.Targets(), 1, "the call's change stays in the Txn")
			require.NoError(t, tx.Rollback(ctx))
		})
	}
}
