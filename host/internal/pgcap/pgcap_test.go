package pgcap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// env is one PostgreSQL server shared by the package's tests (starting one
// takes seconds), with a Store serving grants on it.
type env struct {
	dsn   string
	store *Store
	admin *pgx.Conn
	// adminSuper: dsn's role is a superuser (else it has CREATEROLE and
	// owns the database); admin is a superuser's connection either way.
	adminSuper bool
}

func (e *env) grant(schema string, l Limits) capability.Grant {
	return NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: schema, Limits: l})
}

func (e *env) backends() *capability.Backends {
	return capability.NewBackends([]capability.Kind{{
		Func: Kind.Func, Engine: Engine,
		NewBackend: func() (capability.Backend, error) { return e.store, nil },
	}})
}

// testCall is one export call of a plugin.
type testCall struct {
	t    testing.TB
	call *capability.Call
}

func (e *env) begin(ctx context.Context, t testing.TB, g capability.Grant) *testCall {
	c := &testCall{t: t, call: capability.NewCall(ctx, "test", []capability.Grant{g}, e.backends())}
	// A failing test must not leave a connection out of its pool.
	t.Cleanup(func() { c.call.End(context.Background(), false) })
	return c
}

func (c *testCall) do(ctx context.Context, stmts ...abi.SQLStatement) (*abi.SQLResponse, error) {
	c.t.Helper()
	b, err := json.Marshal(abi.SQLRequest{Statements: stmts})
	require.NoError(c.t, err)
	out, err := Kind.Func.Call(ctx, c.call, b)
	if err != nil {
		return nil, err
	}
	var resp abi.SQLResponse
	require.NoError(c.t, json.Unmarshal(out, &resp), "result is not JSON: %s", out)
	return &resp, nil
}

func (c *testCall) sql(ctx context.Context, q ...string) (*abi.SQLResponse, error) {
	c.t.Helper()
	var stmts []abi.SQLStatement
	for _, s := range q {
		stmts = append(stmts, abi.SQLStatement{SQL: s})
	}
	return c.do(ctx, stmts...)
}

func (c *testCall) must(ctx context.Context, q ...string) *abi.SQLResponse {
	c.t.Helper()
	resp, err := c.sql(ctx, q...)
	require.NoError(c.t, err, "%v", q)
	return resp
}

func (c *testCall) end(ctx context.Context, ok bool) error { return c.call.End(ctx, ok) }

// oneCall runs q in one committed call.
func (e *env) oneCall(t testing.TB, g capability.Grant, q ...string) *abi.SQLResponse {
	t.Helper()
	c := e.begin(context.Background(), t, g)
	resp := c.must(context.Background(), q...)
	require.NoError(t, c.end(context.Background(), true))
	return resp
}

// adminValue reads one value as the admin, outside the capability.
func (e *env) adminValue(t testing.TB, q string) string {
	t.Helper()
	var v *string
	err := e.admin.QueryRow(context.Background(), q).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "<no row>"
	}
	require.NoError(t, err, q)
	if v == nil {
		return "<null>"
	}
	return *v
}

// TestPostgreSQL runs every case twice on one server: with a superuser as
// the admin, and with an admin that has CREATEROLE and owns its database
// but is not a superuser, as managed services give. e.admin inspects as
// the superuser either way.
func TestPostgreSQL(t *testing.T) {
	srv := pgtest.Start(t)
	for _, mode := range []struct{ name, db, dsn string }{
		{"superuser admin", "postgres", srv.DSN("postgres")},
		{"createrole admin", "managed", srv.Admin(t, "managed")},
	} {
		t.Run(mode.name, func(t *testing.T) {
			e := &env{dsn: mode.dsn, store: NewStore(), adminSuper: mode.db == "postgres"}
			t.Cleanup(func() { e.store.Close() })
			var err error
			e.admin, err = pgx.Connect(t.Context(), srv.DSN(mode.db))
			require.NoError(t, err)
			t.Cleanup(func() { e.admin.Close(context.Background()) })
			// Installed before any role is provisioned; the cases below
			// show the plugin refused by privilege, not by its absence.
			_, err = e.admin.Exec(t.Context(), "CREATE EXTENSION dblink SCHEMA public")
			require.NoError(t, err)
			if mode.db == "managed" {
				// Owned by the superuser, not the admin: the host cannot
				// revoke it and refuses to provision until the operator
				// does (see testOutbound).
				testOutboundRefused(t, e)
			}

			t.Run("values", func(t *testing.T) { testValues(t, e) })
			t.Run("transaction per call", func(t *testing.T) { testTransactionPerCall(t, e) })
			t.Run("a call that writes nothing", func(t *testing.T) { testWroteNothing(t, e) })
			t.Run("hostile", func(t *testing.T) { testHostile(t, e) })
			t.Run("transaction control", func(t *testing.T) { testTransactionControl(t, e) })
			t.Run("limits", func(t *testing.T) { testLimits(t, e) })
			t.Run("lock waits", func(t *testing.T) { testLockWait(t, e) })
			t.Run("session state reset", func(t *testing.T) { testReset(t, e) })
			t.Run("statements prepared across calls", func(t *testing.T) { testPrepared(t, e) })
			t.Run("tenants", func(t *testing.T) { testTenants(t, e) })
			t.Run("txn", func(t *testing.T) { testTxn(t, e) })
			t.Run("roles", func(t *testing.T) { testRoles(t, e) })
			t.Run("config", func(t *testing.T) { testConfig(t, e) })
			t.Run("outbound", func(t *testing.T) { testOutbound(t, e) })
			t.Run("shared objects", func(t *testing.T) { testShared(t, e) })
			t.Run("counters off", func(t *testing.T) { testCountersOff(t, e) })
			t.Run("extension in the host schema", func(t *testing.T) { testHostSchemaExtension(t, e) })
			if e.adminSuper {
				t.Run("a stuck backend is ended", func(t *testing.T) { testStuckBackend(t, e, "stuck") })
			} else {
				t.Run("the right to end a stuck backend", func(t *testing.T) { testSignalRight(t, e, mode.db) })
				t.Run("admin not the database's owner", func(t *testing.T) { testNotOwner(t, e) })
			}
		})
	}
}

func testValues(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("vals", Limits{})
	e.oneCall(t, g, "CREATE TABLE v (id bigint PRIMARY KEY, i integer, f double precision, t text, b bytea, ok boolean, j json, n numeric, ts timestamptz)")
	c := e.begin(ctx, t, g)
	resp, err := c.do(ctx, abi.SQLStatement{
		SQL:  "INSERT INTO v VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		Args: []any{1, 42, 1.5, "héllo \"x\"\n", abi.SQLBlob{0, 1, 255}, true, `{"a": [1, 2]}`, "12.50", "2024-01-02T03:04:05Z"},
	}, abi.SQLStatement{SQL: "INSERT INTO v (id) VALUES (2), (3)"})
	require.NoError(t, err)
	require.NoError(t, c.end(ctx, true))
	assert.Equal(t, abi.DialectPostgres, resp.Dialect)
	assert.Equal(t, int64(1), resp.Results[0].RowsAffected)
	assert.Equal(t, int64(2), resp.Results[1].RowsAffected)

	c = e.begin(ctx, t, g)
	resp, err = c.do(ctx, abi.SQLStatement{SQL: "SELECT id, i, f, t, b, ok, j, n, ts, 'Infinity'::float8 AS inf FROM v ORDER BY id", JSONColumns: []string{"j"}})
	require.NoError(t, err)
	require.NoError(t, c.end(ctx, true))
	assert.Equal(t, []string{"id", "i", "f", "t", "b", "ok", "j", "n", "ts", "inf"}, resp.Results[0].Columns)
	row, _ := json.Marshal(resp.Results[0].Rows[0])
	assert.JSONEq(t, `[1, 42, 1.5, "héllo \"x\"\n", {"blob": "AAH/"}, 1, {"a":[1,2]}, 12.50, "2024-01-02 03:04:05+00", "+Inf"]`, string(row))
	row, _ = json.Marshal(resp.Results[0].Rows[1])
	assert.JSONEq(t, `[2, null, null, null, null, null, null, null, null, "+Inf"]`, string(row))
	assert.Len(t, resp.Results[0].Rows, 3)

	// A string fills a column of any type the server can read it as.
	c = e.begin(ctx, t, g)
	_, err = c.do(ctx, abi.SQLStatement{SQL: "UPDATE v SET i = $1, j = $2 WHERE id = $3", Args: []any{"7", "[]", 2}})
	require.NoError(t, err)
	_, err = c.do(ctx, abi.SQLStatement{SQL: "SELECT id FROM v WHERE id = $1", Args: []any{"not a number"}})
	require.ErrorIs(t, err, abi.ErrInvalidArgument)
	require.NoError(t, c.end(ctx, true))
	assert.Equal(t, "7", e.adminValue(t, "SELECT i::text FROM vals.v WHERE id = 2"))
}

func testTransactionPerCall(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("tpc", Limits{})
	e.oneCall(t, g, "CREATE TABLE t (x integer UNIQUE)")

	c := e.begin(ctx, t, g)
	c.must(ctx, "INSERT INTO t VALUES (1)")
	require.NoError(t, c.end(ctx, false))
	assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM tpc.t"), "a failed call's write")

	// A failing statement undoes itself only: the call goes on, as on
	// SQLite, and commits what it kept.
	c = e.begin(ctx, t, g)
	_, err := c.sql(ctx, "INSERT INTO t VALUES (2)", "INSERT INTO t VALUES (2)")
	require.ErrorIs(t, err, abi.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), "statement 1")
	_, err = c.sql(ctx, "SELECT nonsense FROM nowhere")
	require.ErrorIs(t, err, abi.ErrInvalidArgument)
	c.must(ctx, "INSERT INTO t VALUES (3)")
	require.NoError(t, c.end(ctx, true))
	assert.Equal(t, "2,3", e.adminValue(t, "SELECT string_agg(x::text, ',' ORDER BY x) FROM tpc.t"))

	// The statements of one request go in one round trip, each checked
	// for the commit guard after it: a guard armed by the first write
	// and checked again after the second is armed once, or the commit,
	// which releases one guard, fails.
	c = e.begin(ctx, t, g)
	resp := c.must(ctx, "SELECT 1", "INSERT INTO t VALUES (4)", "INSERT INTO t VALUES (5)", "SELECT 2")
	require.Len(t, resp.Results, 4)
	assert.Equal(t, "2", string(resp.Results[3].Rows[0][0]))
	assert.Equal(t, int64(1), resp.Results[2].RowsAffected)
	require.NoError(t, c.end(ctx, true))
	assert.Equal(t, "2,3,4,5", e.adminValue(t, "SELECT string_agg(x::text, ',' ORDER BY x) FROM tpc.t"))

	// A statement the host refuses after it ended on the server (a write
	// over the rows limit) is undone with the statements after it, which
	// ran in savepoints nested in its own; those before it stay, and the
	// call goes on.
	lg := e.grant("tpc", Limits{MaxRows: 3})
	c = e.begin(ctx, t, lg)
	_, err = c.sql(ctx, "INSERT INTO t VALUES (6)", "INSERT INTO t SELECT g FROM generate_series(100, 110) AS g RETURNING x", "INSERT INTO t VALUES (7)")
	require.ErrorIs(t, err, abi.ErrResourceExhausted)
	assert.Contains(t, err.Error(), "statement 1")
	c.must(ctx, "INSERT INTO t VALUES (8)")
	require.NoError(t, c.end(ctx, true))
	assert.Equal(t, "2,3,4,5,6,8", e.adminValue(t, "SELECT string_agg(x::text, ',' ORDER BY x) FROM tpc.t"))
	assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM wasmhist.commit_guard"))
}

// hostileCase is a statement a plugin must not get away with.
type hostileCase struct {
	name string
	sql  string
	want error
}

// privilegeRefusals are PostgreSQL's messages for the privilege a hostile
// case lacks (SQLSTATE 42501), by case: the thing attacked exists, so
// its absence is not why the case fails.
var privilegeRefusals = map[string]string{
	"dblink":            "permission denied for function dblink",
	"dblink_connect":    "permission denied for function dblink_connect",
	"dblink_exec":       "permission denied for function dblink_exec",
	"dblink_send_query": "permission denied for function dblink_send_query",
	"dblink_connect_u":  "permission denied for function dblink_connect_u",
	"set role postgres": `permission denied to set role "postgres"`,
	"create extension":  `permission denied to create extension "postgres_fdw"`,
}

func testHostile(t *testing.T, e *env) {
	ctx := context.Background()
	mine, theirs := e.grant("mine", Limits{}), e.grant("theirs", Limits{})
	e.oneCall(t, theirs, "CREATE TABLE secret (x text)", "INSERT INTO secret VALUES ('their secret')")
	e.oneCall(t, mine, "CREATE TABLE secret (x text)", "INSERT INTO secret VALUES ('mine')")
	_, err := e.admin.Exec(ctx, `INSERT INTO wasmhist.sessions VALUES ('s1', 1, now(), '{"secret": true}')`)
	require.NoError(t, err)
	tmp := t.TempDir()
	admin := e.adminValue(t, "SELECT datdba::regrole::text FROM pg_database WHERE datname = current_database()")
	cases := []hostileCase{
		{"another grant's schema", "SELECT * FROM theirs.secret", abi.ErrPermissionDenied},
		{"another grant's schema, write", "INSERT INTO theirs.secret VALUES ('x')", abi.ErrPermissionDenied},
		{"create in another schema", "CREATE TABLE theirs.mine (x int)", abi.ErrPermissionDenied},
		{"the host's session rows", "SELECT * FROM wasmhist.sessions", abi.ErrPermissionDenied},
		{"the host's session rows, write", "UPDATE wasmhist.sessions SET revision = 99", abi.ErrPermissionDenied},
		{"the host key", "SELECT * FROM wasmhist.host_key", abi.ErrPermissionDenied},
		{"the commit guard", "DELETE FROM wasmhist.commit_guard", abi.ErrPermissionDenied},
		{"put_row without the key", "SELECT wasmhist.put_row('guess', 'sessions', 's1', 100, '{}')", abi.ErrPermissionDenied},
		{"get_rows without the key", "SELECT * FROM wasmhist.get_rows('guess', '{sessions}', 's1')", abi.ErrPermissionDenied},
		// In a transaction that wrote: one that has not returns false
		// before it checks the key, having done nothing.
		{"guard_if_wrote without the key", "WITH w AS (INSERT INTO secret VALUES ('x') RETURNING 1) SELECT wasmhist.guard_if_wrote('guess', '\\x00') FROM w", abi.ErrPermissionDenied},
		{"check_key", "SELECT wasmhist.check_key('guess')", abi.ErrPermissionDenied},
		{"drop the host schema", "DROP SCHEMA wasmhist CASCADE", abi.ErrPermissionDenied},
		{"move a table into the host schema", "ALTER TABLE secret SET SCHEMA wasmhist", abi.ErrPermissionDenied},
		{"rename a host table", "ALTER TABLE wasmhist.sessions RENAME TO mine", abi.ErrPermissionDenied},
		{"create in public", "CREATE TABLE public.x (y int)", abi.ErrPermissionDenied},
		{"pg_read_file", "SELECT pg_read_file('/etc/passwd')", abi.ErrPermissionDenied},
		{"pg_ls_dir", "SELECT pg_ls_dir('.')", abi.ErrPermissionDenied},
		{"lo_import", "SELECT lo_import('/etc/passwd')", abi.ErrPermissionDenied},
		{"copy to program", "COPY secret TO PROGRAM 'touch " + tmp + "/pwned'", abi.ErrPermissionDenied},
		{"copy from program", "COPY secret FROM PROGRAM 'echo x'", abi.ErrPermissionDenied},
		{"copy to a file", "COPY secret TO '" + tmp + "/out.csv'", abi.ErrPermissionDenied},
		{"copy from a file", "COPY secret FROM '/etc/hostname'", abi.ErrPermissionDenied},
		{"set role to the admin", "SET ROLE " + admin, abi.ErrPermissionDenied},
		// postgres exists and is a superuser: refused by privilege.
		{"set role postgres", "SET ROLE postgres", abi.ErrPermissionDenied},
		{"set session authorization", "SET SESSION AUTHORIZATION postgres", abi.ErrPermissionDenied},
		{"create role", "CREATE ROLE evil SUPERUSER", abi.ErrPermissionDenied},
		{"grant itself membership", "GRANT pg_read_server_files TO CURRENT_USER", abi.ErrPermissionDenied},
		{"alter itself superuser", "ALTER ROLE CURRENT_USER SUPERUSER", abi.ErrPermissionDenied},
		{"create extension", "CREATE EXTENSION postgres_fdw", abi.ErrPermissionDenied},
		{"create trusted extension", "CREATE EXTENSION pgcrypto", abi.ErrPermissionDenied},
		// dblink is installed (in public): refused by privilege (42501).
		{"dblink", "SELECT * FROM public.dblink('dbname=postgres', 'SELECT 1') AS t(x int)", abi.ErrPermissionDenied},
		{"dblink_connect", "SELECT public.dblink_connect('dbname=postgres user=postgres')", abi.ErrPermissionDenied},
		{"dblink_exec", "SELECT public.dblink_exec('dbname=postgres', 'CREATE ROLE evil SUPERUSER')", abi.ErrPermissionDenied},
		{"dblink_send_query", "SELECT public.dblink_send_query('x', 'SELECT pg_sleep(20)')", abi.ErrPermissionDenied},
		{"dblink_connect_u", "SELECT public.dblink_connect_u('dbname=postgres')", abi.ErrPermissionDenied},
		{"temp table", "CREATE TEMP TABLE tt (x int)", abi.ErrPermissionDenied},
		{"temp table by schema", "CREATE TABLE pg_temp.tt (x int)", abi.ErrPermissionDenied},
		{"untrusted language", "CREATE FUNCTION f() RETURNS int LANGUAGE c AS '/lib/x86_64-linux-gnu/libc.so.6', 'abort'", abi.ErrPermissionDenied},
		{"replication role", "SET session_replication_role = replica", abi.ErrPermissionDenied},
		{"load a library", "LOAD '/lib/x86_64-linux-gnu/libc.so.6'", abi.ErrPermissionDenied},
		{"checkpoint", "CHECKPOINT", abi.ErrPermissionDenied},
		// Refused inside the call's transaction before privileges count.
		{"alter system", "ALTER SYSTEM SET fsync = off", abi.ErrInvalidArgument},
		{"create database", "CREATE DATABASE evil", abi.ErrInvalidArgument},
		{"two statements in one", "SELECT 1; SELECT 2", abi.ErrInvalidArgument},
		{"terminate the host's connections", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '" + admin + "'", abi.ErrPermissionDenied},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c := e.begin(ctx, t, mine)
			_, err := c.sql(ctx, tt.sql)
			c.end(ctx, false)
			require.ErrorIs(t, err, tt.want)
			var ae *abi.Error
			require.ErrorAs(t, err, &ae)
			assert.Contains(t, err.Error(), privilegeRefusals[tt.name])
		})
	}
	t.Run("reset role changes nothing", func(t *testing.T) {
		c := e.begin(ctx, t, mine)
		c.must(ctx, "RESET ROLE")
		_, err := c.sql(ctx, "SELECT * FROM theirs.secret")
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		resp := c.must(ctx, "SELECT current_user = session_user, current_user LIKE 'wasmhist_mine_%'")
		require.NoError(t, c.end(ctx, true))
		assert.JSONEq(t, `[1, 1]`, mustJSON(resp.Results[0].Rows[0]))
	})
	t.Run("the host's data is not visible", func(t *testing.T) {
		resp := e.oneCall(t, mine, "SELECT string_agg(x, ',') FROM secret")
		assert.JSONEq(t, `["mine"]`, mustJSON(resp.Results[0].Rows[0]))
	})
	// Everything as it was.
	assert.Equal(t, "their secret", e.adminValue(t, "SELECT string_agg(x, ',') FROM theirs.secret"))
	assert.Equal(t, "mine", e.adminValue(t, "SELECT string_agg(x, ',') FROM mine.secret"))
	assert.Equal(t, `1 {"secret": true}`, e.adminValue(t, "SELECT revision || ' ' || data FROM wasmhist.sessions WHERE id = 's1'"))
	assert.Equal(t, "<no row>", e.adminValue(t, "SELECT rolname::text FROM pg_roles WHERE rolname = 'evil'"))
	assert.NoFileExists(t, tmp+"/pwned")
	assert.NoFileExists(t, tmp+"/out.csv")
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testWroteNothing covers the end of a call whose transaction has nothing
// to commit, which the host rolls back, and the begin that bounds every
// call's statements on the server.
func testWroteNothing(t *testing.T, e *env) {
	ctx := context.Background()
	g := NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "nowrite", Limits: Limits{Timeout: 3 * time.Second}, LockWait: 2 * time.Second})
	e.oneCall(t, g, "CREATE TABLE t (x integer)")

	t.Run("the server's limit is set at the begin", func(t *testing.T) {
		// Set inside begin_checks, it holds for the statements after it:
		// the request limit, the lock wait and a second.
		resp := e.oneCall(t, g, "SELECT current_setting('statement_timeout')")
		assert.JSONEq(t, `["6s"]`, mustJSON(resp.Results[0].Rows[0]))
	})
	t.Run("a NOTIFY is sent by a call that writes", func(t *testing.T) {
		l, err := pgx.Connect(ctx, e.dsn)
		require.NoError(t, err)
		defer l.Close(ctx)
		_, err = l.Exec(ctx, "LISTEN nowrite_news")
		require.NoError(t, err)
		// A call that writes nothing ends in a ROLLBACK, which drops
		// its notification; were it committed, "alone" would come first.
		e.oneCall(t, g, "SELECT pg_notify('nowrite_news', 'alone')")
		e.oneCall(t, g, "INSERT INTO t VALUES (1)", "SELECT pg_notify('nowrite_news', 'with a write')")
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := l.WaitForNotification(wctx)
		require.NoError(t, err)
		assert.Equal(t, "with a write", n.Payload)
	})
	t.Run("its statements are prepared for the calls after", func(t *testing.T) {
		const q = "SELECT count(*) FROM t WHERE x > 0"
		e.oneCall(t, g, q)
		assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM pg_stat_activity a WHERE a.usename LIKE 'wasmhist_nowrite_%'"),
			"one connection of the role, which holds the statement")
		c := e.begin(ctx, t, g)
		resp := c.must(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql AND statement = '"+q+"'")
		require.NoError(t, c.end(ctx, true))
		assert.JSONEq(t, `[1]`, mustJSON(resp.Results[0].Rows[0]))
	})
}

func testTransactionControl(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("txctl", Limits{})
	e.oneCall(t, g, "CREATE TABLE t (x integer)")
	for _, tt := range []struct {
		name  string
		stmts []string
		// ends: the call cannot go on (the statement is transaction
		// control); else the statement failed alone.
		ends bool
		// stops: in one request, a statement before the transaction
		// control fails, so the request stops there and the call goes on.
		stops bool
	}{
		{"commit after a write", []string{"INSERT INTO t VALUES (1)", "COMMIT"}, true, false},
		{"commit and chain", []string{"INSERT INTO t VALUES (1)", "COMMIT AND CHAIN"}, true, false},
		{"end", []string{"INSERT INTO t VALUES (1)", "END"}, true, false},
		{"commit before a write", []string{"COMMIT", "INSERT INTO t VALUES (1)"}, true, false},
		{"rollback then write", []string{"ROLLBACK", "INSERT INTO t VALUES (1)"}, true, false},
		{"begin", []string{"INSERT INTO t VALUES (1)", "BEGIN"}, true, false},
		{"start transaction", []string{"START TRANSACTION"}, true, false},
		{"savepoint", []string{"INSERT INTO t VALUES (1)", "SAVEPOINT s"}, true, false},
		{"release the host's savepoint", []string{"INSERT INTO t VALUES (1)", "RELEASE SAVEPOINT wasmhist_stmt"}, true, false},
		{"roll back the host's savepoint", []string{"INSERT INTO t VALUES (1)", "ROLLBACK TO SAVEPOINT wasmhist_stmt"}, true, false},
		{"prepare transaction", []string{"INSERT INTO t VALUES (1)", "PREPARE TRANSACTION 'x'"}, true, false},
		// Nothing written, so no commit guard: the server prepares it.
		{"prepare transaction after locks only", []string{"LOCK TABLE t IN SHARE MODE", "SELECT pg_advisory_xact_lock(42)", "PREPARE TRANSACTION 'held'"}, true, false},
		{"constraints immediate", []string{"INSERT INTO t VALUES (1)", "SET CONSTRAINTS ALL IMMEDIATE", "COMMIT"}, true, true},
		{"a procedure that commits", []string{
			"CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ BEGIN INSERT INTO t VALUES (1); COMMIT; END $$", "CALL p()"}, false, false},
		{"a DO block that commits", []string{"DO $$ BEGIN INSERT INTO t VALUES (1); COMMIT; END $$"}, false, false},
	} {
		// Each case as one request per statement, and as one request,
		// whose statements go in one round trip.
		for _, oneRequest := range []bool{false, true} {
			name := tt.name
			if oneRequest {
				name += ", one request"
			}
			t.Run(name, func(t *testing.T) {
				c := e.begin(ctx, t, g)
				var err error
				if oneRequest {
					_, err = c.sql(ctx, tt.stmts...)
				}
				if oneRequest && tt.stops {
					// The commit guard fails the statement before the
					// COMMIT, which does not run: the call commits the
					// statement before it.
					require.ErrorIs(t, err, abi.ErrPermissionDenied)
					assert.Contains(t, err.Error(), "statement 1")
					require.NoError(t, c.end(ctx, true))
					assert.Equal(t, "1", e.adminValue(t, "SELECT string_agg(x::text, ',') FROM txctl.t"))
					_, err = e.admin.Exec(ctx, "DELETE FROM txctl.t")
					require.NoError(t, err)
					return
				}
				for _, q := range tt.stmts {
					if oneRequest {
						break
					}
					if _, serr := c.sql(ctx, q); err == nil {
						err = serr
					}
				}
				require.Error(t, err)
				var ae *abi.Error
				require.ErrorAs(t, err, &ae)
				assert.Contains(t, []abi.Code{abi.CodePermissionDenied, abi.CodeInvalidArgument}, ae.Code, "%v", err)
				// Later requests fail alike and so does the call's end: the
				// plugin returning success cannot keep any of it.
				_, lerr := c.sql(ctx, "INSERT INTO t VALUES (2)")
				endErr := c.end(ctx, true)
				if tt.ends {
					require.Error(t, lerr, "a request after transaction control")
					require.Error(t, endErr, "the call's end after transaction control")
				}
				prepared := e.adminValue(t, "SELECT coalesce(string_agg(quote_literal(gid), ','), '') FROM pg_prepared_xacts")
				assert.Empty(t, prepared, "a prepared transaction outlived the call")
				for _, gid := range strings.Split(prepared, ",") {
					if gid != "" { // let the cases after it run
						e.admin.Exec(ctx, "ROLLBACK PREPARED "+gid)
					}
				}
				if tt.ends {
					assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM txctl.t"), "committed by the plugin")
				} else {
					assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM txctl.t WHERE x = 1"), "committed by the plugin")
				}
				_, err = e.admin.Exec(ctx, "DELETE FROM txctl.t")
				require.NoError(t, err)
				_, err = e.admin.Exec(ctx, "DROP PROCEDURE IF EXISTS txctl.p")
				require.NoError(t, err)
			})
		}
	}
	// The host's own commit still works after all that.
	e.oneCall(t, g, "INSERT INTO t VALUES (5)")
	assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM txctl.t"))
	assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM wasmhist.commit_guard"))
	assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_prepared_xacts"))
}

func testLimits(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("limits", Limits{Timeout: 300 * time.Millisecond, MaxRows: 100, MaxResultBytes: 64 << 10, MaxStatements: 3, MaxRequestBytes: 4096})
	// The table, within the default limits: a loaded machine's DDL is not
	// what this case is about.
	e.oneCall(t, e.grant("limits", Limits{}), "CREATE TABLE t (x integer)", "INSERT INTO t VALUES (1)")
	const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
	for _, tt := range []struct {
		name   string
		stmts  []string
		want   error
		poison bool
	}{
		{"pg_sleep", []string{"SELECT pg_sleep(30)"}, abi.ErrResourceExhausted, true},
		{"endless recursive cte", []string{endless + "SELECT count(*) FROM c"}, abi.ErrResourceExhausted, true},
		{"statement_timeout off", []string{"SET statement_timeout = 0", "SELECT pg_sleep(30)"}, abi.ErrResourceExhausted, true},
		{"too many rows", []string{endless + "SELECT x FROM c"}, abi.ErrResourceExhausted, false},
		// The server ends the statement (and the host's statements after
		// it in its round trip) before the host reads past the limit: it
		// is undone all the same.
		{"too many rows written", []string{"INSERT INTO t SELECT 3 FROM generate_series(1, 150) RETURNING x"}, abi.ErrResourceExhausted, false},
		{"too many bytes", []string{"SELECT repeat('x', 100000)"}, abi.ErrResourceExhausted, false},
		{"too many statements", []string{"SELECT 1", "SELECT 2", "SELECT 3", "SELECT 4"}, abi.ErrResourceExhausted, false},
		{"too large a request", []string{"SELECT '" + strings.Repeat("x", 5000) + "'"}, abi.ErrResourceExhausted, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := e.begin(ctx, t, g)
			start := time.Now()
			_, err := c.sql(ctx, "INSERT INTO t VALUES (2)")
			require.NoError(t, err)
			_, err = c.sql(ctx, tt.stmts...)
			require.ErrorIs(t, err, tt.want)
			assert.Less(t, time.Since(start), 5*time.Second)
			endErr := c.end(ctx, true)
			if tt.poison {
				require.Error(t, endErr, "a call whose statement ran out of time must fail")
				assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM limits.t"))
			} else {
				require.NoError(t, endErr)
				assert.Equal(t, "2", e.adminValue(t, "SELECT count(*)::text FROM limits.t"))
			}
			_, err = e.admin.Exec(ctx, "DELETE FROM limits.t WHERE x = 2")
			require.NoError(t, err)
		})
	}
	t.Run("a row far past the result limit", func(t *testing.T) {
		// pgx reads a whole row into memory, up to 1 GiB, before the
		// result's limit sees it: a row past twice the limit ends the
		// connection as its header arrives, and the call is undone.
		g := e.grant("limits", Limits{Timeout: 20 * time.Second, MaxResultBytes: 64 << 10})
		c := e.begin(ctx, t, g)
		c.must(ctx, "INSERT INTO t VALUES (2)")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := c.sql(ctx, "SELECT repeat('x', 100 << 20)")
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, abi.ErrResourceExhausted)
		assert.ErrorContains(t, err, "exceeds the result limit of 65536 bytes, and ended the connection")
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "the host read the row into memory")
		require.Error(t, c.end(ctx, true), "the call's connection ended")
		assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM limits.t"))
	})
	t.Run("the commit's checks are the host's to time", func(t *testing.T) {
		// A call that created a table has the host look through the
		// catalog at its commit (checkCatalog), here behind another
		// transaction's lock: the plugin's limit bounds the plugin's work,
		// not the host's, and a slow server fails no call for it.
		holder, err := pgx.Connect(ctx, e.admin.Config().ConnString())
		require.NoError(t, err)
		defer holder.Close(ctx)
		lock, err := holder.Begin(ctx)
		require.NoError(t, err)
		_, err = lock.Exec(ctx, "LOCK TABLE pg_catalog.pg_largeobject_metadata IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		c := e.begin(ctx, t, g)
		c.must(ctx, "CREATE TABLE slow_check (x integer)")
		const held = 1200 * time.Millisecond
		released := make(chan struct{})
		time.AfterFunc(held, func() { lock.Rollback(ctx); close(released) })
		start := time.Now()
		err = c.end(ctx, true)
		<-released
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(start), held, "the check did not wait for the lock: the case shows nothing")
		assert.Equal(t, "limits.slow_check", e.adminValue(t, "SELECT to_regclass('limits.slow_check')::text"))
	})
	// The connections are fine afterwards.
	resp := e.oneCall(t, g, "SELECT count(*) FROM t")
	assert.JSONEq(t, `[1]`, mustJSON(resp.Results[0].Rows[0]))
}

func testReset(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("reset", Limits{})
	e.oneCall(t, g, "CREATE TABLE t (x integer)", "CREATE SEQUENCE s")
	c := e.begin(ctx, t, g)
	c.must(ctx, "SET search_path = pg_catalog", "SELECT pg_advisory_lock(42)", "PREPARE q AS SELECT 1")
	c.must(ctx, "DECLARE held CURSOR WITH HOLD FOR SELECT 1", "LISTEN news", "SELECT nextval('reset.s')")
	c.must(ctx, "SET work_mem = '1GB'", "SELECT set_config('lock_timeout', '1s', false)")
	require.NoError(t, c.end(ctx, true))
	for range 3 { // whichever pooled connection serves the next calls
		resp := e.oneCall(t, g, "SELECT current_setting('search_path'), current_setting('work_mem'), current_setting('lock_timeout')",
			"SELECT count(*) FROM pg_prepared_statements WHERE from_sql", "SELECT count(*) FROM t",
			"SELECT count(*) FROM pg_cursors WHERE is_holdable", "SELECT count(*) FROM pg_listening_channels()")
		assert.JSONEq(t, `["reset", "4MB", "0"]`, mustJSON(resp.Results[0].Rows[0]))
		assert.JSONEq(t, `[0]`, mustJSON(resp.Results[1].Rows[0]), "prepared statements")
		assert.JSONEq(t, `[0]`, mustJSON(resp.Results[3].Rows[0]), "cursors")
		assert.JSONEq(t, `[0]`, mustJSON(resp.Results[4].Rows[0]), "channels")
		c := e.begin(ctx, t, g)
		_, err := c.sql(ctx, "SELECT currval('s')")
		require.Error(t, err, "the sequence's value in the session outlived the call")
		assert.Contains(t, err.Error(), "not yet defined in this session")
		require.NoError(t, c.end(ctx, false))
	}
	assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory'"))
}

// testPrepared: a plugin's statements stay prepared on its connection
// across calls, within a bound, and a prepared statement gone stale (its
// result changed, or the plugin deallocated it) runs all the same. The
// calls run one after another, so one pooled connection serves them all.
func testPrepared(t *testing.T, e *env) {
	g := e.grant("prepared", Limits{})
	e.oneCall(t, g, "CREATE TABLE t (x integer)", "INSERT INTO t VALUES (1), (2)")
	const q = "SELECT * FROM t ORDER BY x"
	rows := func(t *testing.T, q ...string) string {
		t.Helper()
		resp := e.oneCall(t, g, q...)
		return mustJSON(resp.Results[len(q)-1].Rows)
	}
	// prepared is how many statements the host prepared on the connection
	// (those the plugin made with PREPARE aside), and how often q's ran.
	prepared := func(t *testing.T) (n, runs int) {
		t.Helper()
		resp := e.oneCall(t, g, "SELECT count(*), coalesce(sum(generic_plans + custom_plans) FILTER (WHERE statement = '"+q+"'), 0) FROM pg_prepared_statements WHERE NOT from_sql")
		var v []int
		require.NoError(t, json.Unmarshal([]byte(mustJSON(resp.Results[0].Rows[0])), &v))
		return v[0], v[1]
	}

	t.Run("prepared at a call's end, bound in the calls after", func(t *testing.T) {
		for range 3 {
			assert.Equal(t, `[[1],[2]]`, rows(t, q))
		}
		_, runs := prepared(t)
		assert.Equal(t, 2, runs, "q ran unprepared in the calls after the first")
	})
	t.Run("a changed result", func(t *testing.T) {
		// "cached plan must not change result type": run again, unnamed.
		e.oneCall(t, g, "ALTER TABLE t ADD COLUMN y text DEFAULT 'a'")
		assert.Equal(t, `[[1,"a"],[2,"a"]]`, rows(t, q))
		assert.Equal(t, `[[1,"a"],[2,"a"]]`, rows(t, q))
	})
	t.Run("deallocated by the plugin", func(t *testing.T) {
		assert.Equal(t, `[[1,"a"],[2,"a"]]`, rows(t, "DO $$ BEGIN EXECUTE 'DEALLOCATE ALL'; END $$", q))
		assert.Equal(t, `[[1,"a"],[2,"a"]]`, rows(t, q))
	})
	t.Run("replaced by the plugin's own for one call only", func(t *testing.T) {
		rows(t, q) // prepared again after the case before
		forge := `DO $$ DECLARE n text; BEGIN
			SELECT name INTO n FROM pg_prepared_statements WHERE NOT from_sql AND statement = '` + q + `';
			EXECUTE format('DEALLOCATE %I', n);
			EXECUTE format('PREPARE %I AS SELECT 42, ''forged''', n);
		END $$`
		// Within the call, the plugin's statement is its own to replace.
		assert.Equal(t, `[[42,"forged"]]`, rows(t, forge, q))
		assert.Equal(t, `[[1,"a"],[2,"a"]]`, rows(t, q), "the plugin's PREPARE outlived its call")
	})
	t.Run("a statement that no longer parses at the end", func(t *testing.T) {
		e.oneCall(t, g, "CREATE TABLE gone (x integer)", "SELECT * FROM gone", "DROP TABLE gone")
		assert.Equal(t, `[[2]]`, rows(t, "SELECT count(*) FROM t"))
		assert.Equal(t, `[[0]]`, rows(t, "SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT * FROM gone'"))
	})
	t.Run("the reset runs none of the plugin's functions", func(t *testing.T) {
		// After RESET ALL the search_path is the plugin's, where its
		// format(text, text) matches better than pg_catalog's: code of the
		// plugin's running there would commit outside any call.
		// A role of its own: a connection on which the reset has closed
		// nothing yet, so that no plan of its is cached from before the
		// plugin's function existed.
		g := e.grant("hijack", Limits{})
		e.oneCall(t, g, "CREATE TABLE hijacked (x integer)",
			`CREATE FUNCTION format(text, text) RETURNS text LANGUAGE plpgsql AS $$
			BEGIN INSERT INTO hijack.hijacked VALUES (1); RETURN pg_catalog.format($1, $2); END $$`)
		e.oneCall(t, g, "PREPARE mine AS SELECT 1")
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM hijack.hijacked"), "the plugin's format ran in the reset")
		resp := e.oneCall(t, g, "SELECT count(*) FROM pg_prepared_statements WHERE from_sql")
		assert.Equal(t, `[[0]]`, mustJSON(resp.Results[0].Rows))
	})
	t.Run("preparing runs none of the plugin's code outside its call", func(t *testing.T) {
		// Analysing a cast constant runs its domain's CHECK: the host's
		// prepare of the call's statement must neither write nor leave a
		// lock behind.
		e.oneCall(t, g, "CREATE TABLE checked (x integer)",
			`CREATE FUNCTION evil(integer) RETURNS boolean LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_lock(4242); INSERT INTO prepared.checked VALUES ($1); RETURN true; END $$`,
			"CREATE DOMAIN watched AS integer CHECK (evil(VALUE))", "CREATE TYPE pair AS (x watched)")
		e.oneCall(t, g, "SELECT '(7)'::pair")
		assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM prepared.checked"), "the plugin's CHECK wrote outside its call")
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242"), "the plugin's CHECK left a lock")
		assert.Equal(t, `[["(7)"]]`, rows(t, "SELECT '(7)'::pair"))
	})
	t.Run("a statement that failed as it ran is not run again", func(t *testing.T) {
		// The plugin's own code fails with the stale statement's error
		// (a missing prepared statement), after rows were sent: the
		// statement ran, and must not run twice.
		e.oneCall(t, g, "CREATE SEQUENCE runs", "CREATE TABLE armed (x integer)",
			`CREATE FUNCTION boom(x integer) RETURNS integer LANGUAGE plpgsql AS $$
			BEGIN
				PERFORM nextval('prepared.runs');
				IF x = 3 AND EXISTS (SELECT FROM prepared.armed) THEN EXECUTE 'EXECUTE missing'; END IF;
				RETURN x;
			END $$`)
		const boom = "SELECT boom(x) FROM generate_series(1, 3) x"
		assert.Equal(t, `[[1],[2],[3]]`, rows(t, boom)) // prepared at the call's end
		assert.Equal(t, `[[1],[2],[3]]`, rows(t, boom)) // bound
		ctx := context.Background()
		c := e.begin(ctx, t, g)
		c.must(ctx, "INSERT INTO armed VALUES (1)")
		_, err := c.sql(ctx, boom)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `prepared statement "missing" does not exist`)
		require.NoError(t, c.end(ctx, false))
		assert.Equal(t, "9", e.adminValue(t, "SELECT last_value::text FROM prepared.runs"), "the failed statement ran again")
	})
	t.Run("bounded", func(t *testing.T) {
		// More new statements than the bound, ten a call: the newest stay.
		var newest string
		for i := 0; i < 2*maxCachedStatements; i += 10 {
			var qs []string
			for j := i; j < i+10; j++ {
				newest = fmt.Sprintf("SELECT x + %d FROM t", j)
				qs = append(qs, newest)
			}
			e.oneCall(t, g, qs...)
		}
		held, _ := prepared(t)
		assert.LessOrEqual(t, held, maxCachedStatements)
		assert.Equal(t, `[[1]]`, rows(t, "SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql AND statement = '"+newest+"'"))
	})
}

type tenantKey struct{}

// tenantSchema is the schema of tenant of the grants on prefix, as the
// operator finds it.
func (e *env) tenantSchema(t testing.TB, prefix, tenant string) string {
	t.Helper()
	s := e.adminValue(t, "SELECT schema FROM wasmhist.tenants WHERE prefix = '"+prefix+"' AND tenant = '"+tenant+"'")
	require.NotEqual(t, "<no row>", s, "tenant %s of %s", tenant, prefix)
	return s
}

func testTenants(t *testing.T, e *env) {
	ctx := context.Background()
	g := NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "multi", Tenant: func(ctx context.Context) (string, error) {
		s, ok := ctx.Value(tenantKey{}).(string)
		if !ok {
			return "", errors.New("no tenant")
		}
		return s, nil
	}})
	for _, tenant := range []string{"acme", "globex"} {
		tctx := context.WithValue(ctx, tenantKey{}, tenant)
		c := e.begin(tctx, t, g)
		_, err := c.sql(tctx, "CREATE TABLE secret (x text)", "INSERT INTO secret VALUES ('"+tenant+"')")
		require.NoError(t, err)
		require.NoError(t, c.end(tctx, true))
	}
	actx := context.WithValue(ctx, tenantKey{}, "acme")
	c := e.begin(actx, t, g)
	_, err := c.sql(actx, "SELECT * FROM "+e.tenantSchema(t, "multi", "globex")+".secret")
	require.ErrorIs(t, err, abi.ErrPermissionDenied)
	resp, err := c.sql(actx, "SELECT x FROM secret")
	require.NoError(t, err)
	require.NoError(t, c.end(actx, true))
	assert.JSONEq(t, `[["acme"]]`, mustJSON(resp.Results[0].Rows))

	t.Run("names not readable from another tenant", func(t *testing.T) {
		// acme's call is open, so its backend is in pg_stat_activity.
		c := e.begin(actx, t, g)
		c.must(actx, "SELECT x FROM secret")
		gctx := context.WithValue(ctx, tenantKey{}, "globex")
		other := e.begin(gctx, t, g)
		resp := other.must(gctx,
			`SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'multi\_\_%'`,
			`SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'wasmhist sql multi\_\_%' AND pid <> pg_backend_pid()`,
			`SELECT count(*) FROM pg_namespace WHERE nspname ~ 'acme'`,
			`SELECT count(*) FROM pg_roles WHERE rolname ~ 'acme'`,
			`SELECT count(*) FROM pg_stat_activity WHERE application_name ~ 'acme' OR usename ~ 'acme'`,
			`SELECT count(*) FROM pg_proc WHERE prosrc ~ 'acme'`,
			`SELECT count(*) FROM pg_class WHERE relname ~ 'acme'`,
			`SELECT count(*) FROM pg_description WHERE description ~ 'acme'`,
			`SELECT count(*) FROM pg_shdescription WHERE description ~ 'acme'`,
		)
		// The catalog is readable: the other tenant's schema and backend
		// are there, under names that do not say whose they are.
		assert.JSONEq(t, `[2]`, mustJSON(resp.Results[0].Rows[0]), "both tenants' schemas")
		assert.JSONEq(t, `[1]`, mustJSON(resp.Results[1].Rows[0]), "acme's backend")
		for i, r := range resp.Results[2:] {
			assert.JSONEq(t, `[0]`, mustJSON(r.Rows[0]), "query %d names the tenant", i+2)
		}
		// The map from schemas to tenants is the admin's.
		_, err := other.sql(gctx, "SELECT tenant FROM wasmhist.tenants")
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		assert.ErrorContains(t, err, "permission denied for table tenants")
		other.end(gctx, false)
		c.end(actx, false)
	})

	t.Run("schemas named by their tenant are renamed", func(t *testing.T) {
		// A tenant's schema and role as hosts before opaque names
		// provisioned them, with data and a journal row.
		db, err := e.store.database(ctx, &Config{Name: "main", AdminDSN: e.dsn, Schema: "multi"})
		require.NoError(t, err)
		legacy, legacyRole := "multi__oldco", roleName(db.db, "multi__oldco")
		require.NoError(t, pgx.BeginFunc(ctx, db.admin, func(tx pgx.Tx) error {
			return provisionRole(ctx, tx, db.hostSchema, legacy, legacyRole, password(db.key, legacyRole))
		}))
		e.superExec(t, "CREATE TABLE multi__oldco.secret (x text)", "INSERT INTO multi__oldco.secret VALUES ('oldco')",
			"ALTER TABLE multi__oldco.secret OWNER TO "+legacyRole,
			"INSERT INTO wasmhist.journal (owner, id, revision, updated, data) VALUES ('"+legacyRole+"', 'j', 1, now(), '{}')")
		octx := context.WithValue(ctx, tenantKey{}, "oldco")
		c := e.begin(octx, t, g)
		resp, err := c.sql(octx, "SELECT x FROM secret", "INSERT INTO secret VALUES ('more')", "SELECT current_schema()::text")
		require.NoError(t, err)
		require.NoError(t, c.end(octx, true))
		assert.JSONEq(t, `[["oldco"]]`, mustJSON(resp.Results[0].Rows))
		schema := e.tenantSchema(t, "multi", "oldco")
		assert.JSONEq(t, mustJSON([][]string{{schema}}), mustJSON(resp.Results[2].Rows))
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_namespace WHERE nspname ~ 'oldco'"))
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_roles WHERE rolname ~ 'oldco'"))
		assert.Equal(t, "2", e.adminValue(t, "SELECT count(*)::text FROM "+schema+".secret"))
		assert.Equal(t, roleName(db.db, schema), e.adminValue(t, "SELECT owner FROM wasmhist.journal WHERE id = 'j'"))
	})

	c = e.begin(ctx, t, g)
	_, err = c.sql(ctx, "SELECT 1")
	require.ErrorContains(t, err, "no tenant")
	c.end(ctx, false)
	bad := context.WithValue(ctx, tenantKey{}, "Robert'); DROP")
	c = e.begin(bad, t, g)
	_, err = c.sql(bad, "SELECT 1")
	require.ErrorContains(t, err, "tenant")
	c.end(bad, false)
}

func testTxn(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("runs", Limits{})
	e.oneCall(t, g, "CREATE TABLE m (x integer)")
	target := txn.PostgresTarget("main")
	count := func(t *testing.T) string { return e.adminValue(t, "SELECT count(*)::text FROM runs.m") }
	sessionRow := func(t *testing.T, id string) string {
		return e.adminValue(t, "SELECT revision || ' ' || data FROM wasmhist.sessions WHERE id = '"+id+"'")
	}
	call := func(t *testing.T, ctx context.Context, ok bool, q ...string) {
		t.Helper()
		c := e.begin(ctx, t, g)
		if len(q) > 0 {
			c.must(ctx, q...)
		}
		require.NoError(t, c.end(ctx, ok))
	}

	t.Run("the host reads a session row past the plugin's row bound", func(t *testing.T) {
		// The plugin's rows are bounded by its result limit (64 KiB here,
		// so 192 KiB on the wire); the host's own rows, a whole session,
		// are not, on the same connection after the plugin's requests.
		small := e.grant("runs", Limits{MaxResultBytes: 64 << 10})
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		t.Cleanup(func() { tx.Rollback(ctx) }) // a failure must not keep the connection
		call(t, tctx, true, "SELECT count(*) FROM m")
		c := e.begin(tctx, t, small)
		c.must(tctx, "INSERT INTO m VALUES (9)")
		require.NoError(t, c.end(tctx, true))
		big := []byte(`{"a":"` + strings.Repeat("x", 1<<20) + `"}`)
		require.NoError(t, tx.Put(ctx, target, txn.Sessions, "big", 1, big))
		rev, data, err := tx.Get(ctx, target, txn.Sessions, "big")
		require.NoError(t, err)
		assert.Equal(t, int64(1), rev)
		assert.Equal(t, len(big), len(data))
		require.NoError(t, tx.Rollback(ctx))
		assert.Equal(t, "<no row>", sessionRow(t, "big"))
	})
	t.Run("two calls and the session row commit together", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (1)")
		call(t, tctx, true, "SELECT count(*) FROM m")
		call(t, tctx, true, "INSERT INTO m VALUES (2)")
		assert.Equal(t, []string{target}, tx.Targets())
		require.NoError(t, tx.Put(ctx, target, txn.Sessions, "run1", 1, []byte(`{"a":1}`)))
		require.NoError(t, tx.Put(ctx, target, txn.Journal, "run1", 1, []byte(`{"a":1}`)))
		rev, data, err := tx.Get(ctx, target, txn.Sessions, "run1")
		require.NoError(t, err)
		assert.Equal(t, int64(1), rev)
		assert.JSONEq(t, `{"a":1}`, string(data))
		assert.Equal(t, "0", count(t), "visible before the commit")
		assert.Equal(t, "<no row>", sessionRow(t, "run1"))
		require.NoError(t, tx.Commit(ctx))
		assert.Equal(t, "2", count(t))
		assert.Equal(t, `1 {"a":1}`, sessionRow(t, "run1"))
	})
	t.Run("rolled back: neither", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (3)")
		call(t, tctx, true, "INSERT INTO m VALUES (4)")
		require.NoError(t, tx.Put(ctx, target, txn.Sessions, "run1", 2, []byte(`{"a":2}`)))
		require.NoError(t, tx.Rollback(ctx))
		assert.Equal(t, "2", count(t))
		assert.Equal(t, `1 {"a":1}`, sessionRow(t, "run1"))
	})
	t.Run("a failed later call undoes its part only", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (5)")
		call(t, tctx, false, "INSERT INTO m VALUES (6)")
		require.NoError(t, tx.Put(ctx, target, txn.Sessions, "run1", 2, []byte(`{"a":2}`)))
		require.NoError(t, tx.Commit(ctx))
		assert.Equal(t, "3", count(t))
		assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM runs.m WHERE x = 5"))
	})
	t.Run("stale revision refused", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (7)")
		err := tx.Put(ctx, target, txn.Sessions, "run1", 2, []byte(`{"a":"stale"}`))
		require.ErrorIs(t, err, txn.ErrStale)
		assert.Contains(t, err.Error(), "stored revision is 2")
		require.NoError(t, tx.Rollback(ctx))
		assert.Equal(t, `2 {"a":2}`, sessionRow(t, "run1"))
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM runs.m WHERE x = 7"))
	})
	t.Run("a call after the host's rows is guarded again", func(t *testing.T) {
		// Writing the host's rows ran the plugin's deferred triggers with
		// every constraint immediate: the commit guard's trigger must be
		// deferred again, or the next call's guard fails its statement.
		tx := txn.New()
		t.Cleanup(func() { tx.Rollback(ctx) }) // a failure here must not hold the connection
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (11)")
		require.NoError(t, tx.Put(ctx, target, txn.Sessions, "run3", 1, []byte(`{"c":1}`)))
		call(t, tctx, true, "INSERT INTO m VALUES (12)")
		c := e.begin(tctx, t, g)
		_, err := c.sql(tctx, "INSERT INTO m VALUES (13)", "COMMIT")
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		require.Error(t, c.end(tctx, true))
		require.Error(t, tx.Commit(ctx))
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM runs.m WHERE x >= 11"))
	})
	t.Run("read-only calls leave the txn", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "SELECT count(*) FROM m")
		assert.Empty(t, tx.Targets())
		require.NoError(t, tx.Commit(ctx))
	})
	t.Run("the plugin cannot see or forge the session rows", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (8)")
		require.NoError(t, tx.Put(ctx, target, txn.Sessions, "run2", 1, []byte(`{"b":1}`)))
		c := e.begin(tctx, t, g)
		for _, q := range []string{
			"SELECT * FROM wasmhist.sessions",
			"SELECT * FROM wasmhist.get_rows('', '{sessions}', 'run2')",
			"SELECT wasmhist.put_row(NULL, 'sessions', 'run2', 9, '{}')",
			"SELECT query FROM pg_stat_activity WHERE query LIKE '%put_row%' AND query NOT LIKE '%pg_stat_activity%' AND query ~ '[0-9a-f]{64}'",
		} {
			resp, err := c.sql(tctx, q)
			if err == nil {
				assert.Empty(t, resp.Results[0].Rows, "%s: the host key is visible", q)
				continue
			}
			require.ErrorIs(t, err, abi.ErrPermissionDenied, q)
		}
		require.NoError(t, c.end(tctx, true))
		require.NoError(t, tx.Commit(ctx))
		assert.Equal(t, `1 {"b":1}`, sessionRow(t, "run2"))
	})
	t.Run("the host key is in no statement the plugin's code runs in", func(t *testing.T) {
		// Code can read the parameters of the statement it runs in: an
		// error's context shows them once log_parameter_max_length_on_error
		// is on, which any role may set. The plugin's deferred triggers run
		// in the host's statement that ends its part of a call.
		call(t, ctx, true, "CREATE TABLE loot (c text)", "CREATE TABLE bait (x integer)",
			`CREATE FUNCTION steal() RETURNS trigger LANGUAGE plpgsql AS $$ DECLARE c text; BEGIN
				BEGIN RAISE EXCEPTION 'x'; EXCEPTION WHEN OTHERS THEN GET STACKED DIAGNOSTICS c = PG_EXCEPTION_CONTEXT; END;
				INSERT INTO loot VALUES (c); RETURN NULL; END $$`,
			"CREATE CONSTRAINT TRIGGER steal AFTER INSERT ON bait DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION steal()")
		call(t, ctx, true, "SET log_parameter_max_length_on_error = -1", "INSERT INTO bait VALUES (1)")
		tx := txn.New()
		t.Cleanup(func() { tx.Rollback(ctx) })
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "SET log_parameter_max_length_on_error = -1", "INSERT INTO bait VALUES (2)")
		require.NoError(t, tx.Put(ctx, target, txn.Sessions, "run4", 1, []byte(`{"d":1}`)))
		require.NoError(t, tx.Commit(ctx))
		key := e.adminValue(t, "SELECT key FROM wasmhist.host_key")
		require.Equal(t, 64, len(key), "the host key's length")
		assert.Equal(t, "2", e.adminValue(t, "SELECT count(*)::text FROM runs.loot WHERE c LIKE '%parameters: $1%'"),
			"the triggers did not see the statement's parameters, so the case tests nothing")
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM runs.loot WHERE strpos(c, '"+key+"') > 0"), "the host key leaked")
	})
	t.Run("a settle deletes its own probe rows only, through an index", func(t *testing.T) {
		// The probe functions take no key, so any plugin can pile rows up
		// in the shared table, or hold them in a long transaction: a
		// settle must not read them. Rows of another backend (committed
		// here by the admin, as a stand-in) outlive it, and the delete of
		// one backend's rows uses the index.
		_, err := e.admin.Exec(ctx, "INSERT INTO wasmhist.command_probes (pid) SELECT 1 FROM generate_series(1, 20000)")
		require.NoError(t, err)
		defer e.admin.Exec(ctx, "DELETE FROM wasmhist.command_probes WHERE pid = 1")
		_, err = e.admin.Exec(ctx, "ANALYZE wasmhist.command_probes")
		require.NoError(t, err)
		call(t, ctx, true, "INSERT INTO m VALUES (14)")
		assert.Equal(t, "20000", e.adminValue(t, "SELECT count(*)::text FROM wasmhist.command_probes"))
		var plan string
		require.NoError(t, e.admin.QueryRow(ctx, "EXPLAIN (FORMAT JSON) DELETE FROM wasmhist.command_probes p WHERE p.pid = pg_backend_pid()").Scan(&plan))
		assert.Contains(t, plan, "command_probes_pid", "the delete of one backend's rows reads the table")
		assert.NotContains(t, plan, "Seq Scan")
		assert.Equal(t, "{enable_seqscan=off}", e.adminValue(t,
			"SELECT array_remove(proconfig, 'search_path=pg_catalog, pg_temp')::text FROM pg_proc WHERE oid = 'wasmhist.command_probes_done()'::regprocedure"),
			"a plan made while the table was empty would read it whole")
	})
	t.Run("a plugin's commit inside a txn commits nothing", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (9)")
		c := e.begin(tctx, t, g)
		_, err := c.sql(tctx, "COMMIT")
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		require.Error(t, c.end(tctx, true))
		require.Error(t, tx.Commit(ctx))
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM runs.m WHERE x = 9"))
	})
	t.Run("another schema cannot join the run's transaction", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(ctx, tx)
		call(t, tctx, true, "INSERT INTO m VALUES (10)")
		other := e.grant("runs_other", Limits{})
		c := e.begin(tctx, t, other)
		_, err := c.sql(tctx, "SELECT 1")
		require.ErrorContains(t, err, "cannot join")
		c.end(tctx, false)
		require.NoError(t, tx.Rollback(ctx))
	})
}

func testRoles(t *testing.T, e *env) {
	e.oneCall(t, e.grant("rolecheck", Limits{}), "CREATE TABLE v (x int)", "INSERT INTO v VALUES (1), (2), (3)")
	role := e.adminValue(t, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'rolecheck'")
	assert.Regexp(t, `^wasmhist_rolecheck_[0-9a-f]{8}$`, role)
	assert.Equal(t, "t f f f f f", e.adminValue(t,
		"SELECT concat_ws(' ', rolcanlogin, rolinherit, rolsuper, rolcreaterole, rolcreatedb, rolbypassrls) FROM pg_roles WHERE rolname = '"+role+"'"))
	assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_auth_members WHERE member = '"+role+"'::regrole"))
	assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM pg_namespace WHERE nspowner = '"+role+"'::regrole"))
	// The password is stored as a SCRAM verifier and is the one the host
	// derives (checked by logging in with password authentication would
	// need another pg_hba; the verifier's form is checked here).
	assert.Regexp(t, `^SCRAM-SHA-256\$4096:`, e.adminValue(t, "SELECT rolpassword FROM pg_authid WHERE rolname = '"+role+"'"))
	// Provisioning is idempotent: a second Store (another host) serves the
	// same schema.
	s2 := NewStore()
	t.Cleanup(func() { s2.Close() })
	e2 := &env{dsn: e.dsn, store: s2, admin: e.admin}
	resp := e2.oneCall(t, e.grant("rolecheck", Limits{}), "SELECT count(*) FROM v")
	assert.JSONEq(t, `[3]`, mustJSON(resp.Results[0].Rows[0]))
}

func testConfig(t *testing.T, e *env) {
	ctx := context.Background()
	e.oneCall(t, e.grant("cfg", Limits{}), "SELECT 1")
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{AdminDSN: e.dsn, Schema: "x"}, "no Name"},
		{Config{Name: "n", Schema: "x"}, "no admin DSN"},
		{Config{Name: "n", AdminDSN: e.dsn, Schema: "X; DROP"}, "schema"},
		{Config{Name: "n", AdminDSN: e.dsn, Schema: "wasmhist"}, "not the plugin's"},
		{Config{Name: "n", AdminDSN: e.dsn, Schema: "public"}, "not the plugin's"},
		{Config{Name: "main", AdminDSN: e.dsn + " application_name=x", Schema: "x"}, "granted twice"},
		{Config{Name: "bad", AdminDSN: "host=/nonexistent user=nobody password=hunter2", Schema: "x"}, "bad"},
	} {
		c := e.begin(ctx, t, NewGrant(tt.cfg))
		_, err := c.sql(ctx, "SELECT 1")
		require.ErrorContains(t, err, tt.want)
		assert.NotContains(t, err.Error(), "hunter2", "a secret in a message")
		c.end(ctx, false)
	}
}
