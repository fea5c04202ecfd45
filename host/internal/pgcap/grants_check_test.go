package pgcap

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// superExec runs statements as the superuser, as an operator would.
func (e *env) superExec(t *testing.T, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		_, err := e.admin.Exec(context.Background(), q)
		require.NoError(t, err, q)
	}
}

// testOutboundRefused: dblink, installed by a superuser with EXECUTE for
// PUBLIC, is beyond a CREATEROLE admin's reach: the host provisions no
// role until the operator revokes it, and says so.
func testOutboundRefused(t *testing.T, e *env) {
	ctx := context.Background()
	c := e.begin(ctx, t, e.grant("first", Limits{}))
	_, err := c.sql(ctx, "SELECT 1")
	c.end(ctx, false)
	require.ErrorIs(t, err, ErrOutbound)
	assert.Contains(t, err.Error(), "function dblink")
	assert.Contains(t, err.Error(), "REVOKE ALL ON each FROM PUBLIC")

	e.superExec(t, "REVOKE ALL ON ALL ROUTINES IN SCHEMA public FROM PUBLIC")
	e.oneCall(t, e.grant("first", Limits{}), "SELECT 1")
}

// testOutbound: a foreign server PUBLIC may use, created while hosts run,
// fails the calls of roles provisioned before (rather than letting them
// out); a role provisioned after has the right revoked (by a superuser
// admin) or is refused (by a CREATEROLE admin, until the operator
// revokes it). A plugin that sets its own role's password, or a setting
// of its role, has its run refused and nothing changes.
func testOutbound(t *testing.T, e *env) {
	ctx := context.Background()
	before := e.grant("outb_before", Limits{})
	e.oneCall(t, before, "SELECT 1")
	e.superExec(t,
		"CREATE EXTENSION postgres_fdw SCHEMA public",
		"CREATE SERVER loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS (dbname 'postgres')",
		"GRANT USAGE ON FOREIGN SERVER loop TO PUBLIC")
	t.Cleanup(func() { e.admin.Exec(context.Background(), "DROP EXTENSION postgres_fdw CASCADE") })

	t.Run("installed while the host runs", func(t *testing.T) {
		c := e.begin(ctx, t, before)
		_, err := c.sql(ctx, "CREATE USER MAPPING FOR CURRENT_USER SERVER loop OPTIONS (user 'postgres')")
		c.end(ctx, true)
		require.ErrorIs(t, err, abi.ErrUnavailable)
		assert.Contains(t, err.Error(), "foreign server loop")
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_user_mappings"))
	})
	t.Run("provisioned after", func(t *testing.T) {
		after := e.grant("outb_after", Limits{})
		c := e.begin(ctx, t, after)
		_, err := c.sql(ctx, "SELECT 1")
		c.end(ctx, false)
		if e.adminSuper {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrOutbound)
			assert.Contains(t, err.Error(), "foreign server loop")
			e.superExec(t, "REVOKE USAGE ON FOREIGN SERVER loop FROM PUBLIC")
		}
		c = e.begin(ctx, t, after)
		_, err = c.sql(ctx, "CREATE USER MAPPING FOR CURRENT_USER SERVER loop OPTIONS (user 'postgres')")
		c.end(ctx, true)
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		assert.Contains(t, err.Error(), "permission denied for foreign server loop")
		// The roles provisioned before work again.
		e.oneCall(t, before, "SELECT 1")
	})

	g := e.grant("outb_role", Limits{})
	e.oneCall(t, g, "CREATE TABLE t (x int)")
	role := e.adminValue(t, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'outb_role'")
	password := func() string { return e.adminValue(t, "SELECT rolpassword FROM pg_authid WHERE rolname = '"+role+"'") }
	settings := func() string {
		return e.adminValue(t, "SELECT coalesce(string_agg(array_to_string(setconfig, ','), ';'), '') FROM pg_db_role_setting WHERE setrole = '"+role+"'::regrole")
	}
	pw, set := password(), settings()
	for _, tt := range []struct{ name, sql string }{
		{"password", "ALTER ROLE CURRENT_USER PASSWORD 'known to the plugin'"},
		{"password in a DO block", "DO $$ BEGIN EXECUTE 'ALTER ROLE ' || quote_ident(current_user) || ' PASSWORD ''known'''; END $$"},
		{"setting", "ALTER ROLE CURRENT_USER SET default_transaction_read_only = on"},
		{"setting in this database", "ALTER ROLE CURRENT_USER IN DATABASE " + e.adminValue(t, "SELECT current_database()::text") + " SET work_mem = '2000GB'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := e.begin(ctx, t, g)
			c.must(ctx, "INSERT INTO t VALUES (1)", tt.sql)
			err := c.end(ctx, true)
			require.ErrorIs(t, err, ErrRoleChanged)
			assert.Equal(t, pw, password())
			assert.Equal(t, set, settings())
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM outb_role.t"), "the run's write")
			// The next call on the connection commits.
			e.oneCall(t, g, "INSERT INTO t VALUES (2)")
			e.superExec(t, "DELETE FROM outb_role.t")
		})
	}
}

// testCountersOff: without track_counts the host could not tell what a
// run changed, so it serves no call.
func testCountersOff(t *testing.T, e *env) {
	ctx := context.Background()
	db := e.adminValue(t, "SELECT quote_ident(current_database())")
	e.superExec(t, "ALTER DATABASE "+db+" SET track_counts = off")
	t.Cleanup(func() { e.admin.Exec(context.Background(), "ALTER DATABASE "+db+" RESET track_counts") })
	// Another host: new connections, which take the database's setting.
	e2 := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
	t.Cleanup(func() { e2.store.Close() })
	c := e2.begin(ctx, t, e.grant("counters", Limits{}))
	_, err := c.sql(ctx, "SELECT 1")
	c.end(ctx, false)
	require.ErrorIs(t, err, abi.ErrUnavailable)
	assert.Contains(t, err.Error(), "track_counts is off")
}

// testHostSchemaExtension: an extension created in the host schema (as
// CREATE EXTENSION without SCHEMA does for an admin named like it) gives
// plugin roles nothing, though they may use the schema.
func testHostSchemaExtension(t *testing.T, e *env) {
	ctx := context.Background()
	e.oneCall(t, e.grant("hostext", Limits{}), "SELECT 1")
	e.superExec(t, "CREATE EXTENSION pgcrypto SCHEMA wasmhist")
	t.Cleanup(func() { e.admin.Exec(context.Background(), "DROP EXTENSION pgcrypto") })
	// The next host to start provisions the host schema again.
	e2 := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
	t.Cleanup(func() { e2.store.Close() })
	if !e.adminSuper {
		// The extension's functions are the superuser's: the admin
		// cannot revoke them, and the host serves no plugin role until
		// the operator does.
		c := e2.begin(ctx, t, e.grant("hostext", Limits{}))
		_, err := c.sql(ctx, "SELECT 1")
		c.end(ctx, false)
		require.ErrorIs(t, err, ErrAdminPrivileges)
		assert.Contains(t, err.Error(), "function wasmhist.")
		assert.Contains(t, err.Error(), "in the host schema")
		e.superExec(t, "REVOKE ALL ON ALL ROUTINES IN SCHEMA wasmhist FROM PUBLIC")
	}
	c := e2.begin(ctx, t, e.grant("hostext", Limits{}))
	_, err := c.sql(ctx, "SELECT wasmhist.digest('x', 'sha256')")
	c.end(ctx, false)
	require.ErrorIs(t, err, abi.ErrPermissionDenied)
	assert.Contains(t, err.Error(), "permission denied for function digest")
}

// testNotOwner: a CREATEROLE admin that does not own the database cannot
// take TEMPORARY from PUBLIC (its REVOKE is only a warning); the host
// provisions no plugin role that could create temporary objects, and
// says what the operator must do.
func testNotOwner(t *testing.T, e *env) {
	ctx := context.Background()
	// PostgreSQL's default, which the owner's host took away.
	e.superExec(t, "CREATE ROLE notowner LOGIN CREATEROLE", "GRANT CREATE ON DATABASE managed TO notowner",
		"GRANT TEMPORARY ON DATABASE managed TO PUBLIC")
	t.Cleanup(func() { e.admin.Exec(context.Background(), "REVOKE TEMPORARY ON DATABASE managed FROM PUBLIC") })
	dsn := strings.Replace(e.dsn, "user=managed", "user=notowner", 1)
	require.NotEqual(t, e.dsn, dsn)
	c := e.begin(ctx, t, NewGrant(Config{Name: "notowner", AdminDSN: dsn, Schema: "nottemp", HostSchema: "wasmhist_alt"}))
	_, err := c.sql(ctx, "CREATE TEMP TABLE t (x int)")
	c.end(ctx, false)
	require.ErrorIs(t, err, ErrAdminPrivileges)
	assert.Contains(t, err.Error(), "TEMPORARY")
	assert.Contains(t, err.Error(), "make the admin the database's owner")
}

type bridgeTenant struct{}

// testShared: a plugin serving tenant a that grants its objects to PUBLIC
// or to tenant b's role, or keeps a large object, has its run refused and
// rolled back, so that serving tenant b it reads nothing of a's.
func testShared(t *testing.T, e *env) {
	ctx := context.Background()
	g := NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "bridge", Tenant: func(ctx context.Context) (string, error) {
		s, ok := ctx.Value(bridgeTenant{}).(string)
		if !ok {
			return "", errors.New("no tenant")
		}
		return s, nil
	}})
	a, b := context.WithValue(ctx, bridgeTenant{}, "a"), context.WithValue(ctx, bridgeTenant{}, "b")
	call := func(t *testing.T, ctx context.Context, q ...string) error {
		t.Helper()
		c := e.begin(ctx, t, g)
		c.must(ctx, q...)
		return c.end(ctx, true)
	}
	// Legitimate DDL commits, revoking from PUBLIC included.
	require.NoError(t, call(t, a, "CREATE TABLE secret (x text)", "INSERT INTO secret VALUES ('a''s secret')",
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'", "REVOKE EXECUTE ON FUNCTION f() FROM PUBLIC",
		"CREATE TYPE mood AS ENUM ('ok')", "CREATE SEQUENCE s", "CREATE VIEW v AS SELECT x FROM secret",
		"SELECT lo_unlink(lo_from_bytea(0, 'gone before the commit'))"))
	require.NoError(t, call(t, b, "SELECT 1"))
	db := e.adminValue(t, "SELECT current_database()::text")
	sa, sb := e.tenantSchema(t, "bridge", "a"), e.tenantSchema(t, "bridge", "b")
	roleB := roleName(db, sb)

	// relay makes a deferred trigger that defers another again, which
	// grants a's table to PUBLIC.
	relay := []string{
		"CREATE TABLE relay (x integer)", "CREATE TABLE relay2 (x integer)",
		`CREATE FUNCTION regrant() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN GRANT SELECT ON secret TO PUBLIC; RETURN NULL; END $$`,
		`CREATE FUNCTION redefer() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN SET CONSTRAINTS ALL DEFERRED; INSERT INTO relay2 VALUES (1); RETURN NULL; END $$`,
		"CREATE CONSTRAINT TRIGGER first AFTER INSERT ON relay DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION redefer()",
		"CREATE CONSTRAINT TRIGGER second AFTER INSERT ON relay2 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION regrant()",
	}
	for _, tt := range []struct {
		name string
		sql  []string
		// names is in the refusal: what was shared, with whom.
		names string
	}{
		{"schema to PUBLIC", []string{"GRANT USAGE ON SCHEMA " + sa + " TO PUBLIC"}, "schema " + sa + " to PUBLIC"},
		{"schema to the other tenant", []string{"GRANT USAGE, CREATE ON SCHEMA " + sa + " TO " + roleB}, "schema " + sa + " to " + roleB},
		{"table to PUBLIC", []string{"GRANT SELECT, INSERT ON secret TO PUBLIC"}, "relation secret to PUBLIC"},
		{"table to the other tenant", []string{"GRANT ALL ON secret TO " + roleB}, "relation secret to " + roleB},
		{"column to PUBLIC", []string{"GRANT SELECT (x) ON secret TO PUBLIC"}, "column secret.x to PUBLIC"},
		{"view to PUBLIC", []string{"GRANT SELECT ON v TO PUBLIC"}, "relation v to PUBLIC"},
		{"sequence to PUBLIC", []string{"GRANT USAGE ON SEQUENCE s TO PUBLIC"}, "relation s to PUBLIC"},
		{"function to PUBLIC", []string{"GRANT EXECUTE ON FUNCTION f() TO PUBLIC"}, "function f() to PUBLIC"},
		{"type to the other tenant", []string{"GRANT USAGE ON TYPE mood TO " + roleB}, "type mood to " + roleB},
		{"default privileges", []string{"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC"}, "default privileges to PUBLIC"},
		{"large object", []string{"SELECT lo_from_bytea(0, 'outside the schema and its caps')"}, "large object "},
		{"large object granted", []string{"SELECT lo_from_bytea(4242, 'x')", "GRANT SELECT ON LARGE OBJECT 4242 TO PUBLIC"}, "large object 4242"},
		// A deferred trigger run by the host before its check defers
		// another, which grants: the grant must not wait for the COMMIT,
		// after the check.
		{"table to PUBLIC, by a trigger deferred again", append(relay, "INSERT INTO relay VALUES (1)"), "relation secret to PUBLIC"},
		// The same, with an = of the plugin's that would end the host's
		// round of deferred triggers at once, found first on its path.
		{"table to PUBLIC, by a trigger deferred again, past the plugin's =", append(relay,
			"CREATE FUNCTION always(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
			"CREATE OPERATOR = (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = always)",
			"SET search_path = "+sa+", pg_catalog",
			"INSERT INTO relay VALUES (1)",
		), "relation secret to PUBLIC"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := call(t, a, tt.sql...)
			require.ErrorIs(t, err, ErrShared)
			assert.Contains(t, err.Error(), tt.names)
			c := e.begin(b, t, g)
			_, err = c.sql(b, "SELECT x FROM "+sa+".secret")
			require.ErrorIs(t, err, abi.ErrPermissionDenied, "tenant b reads a's table")
			c.end(b, false)
			assert.Equal(t, "f f", e.adminValue(t, "SELECT concat_ws(' ', has_schema_privilege('"+roleB+"', '"+sa+"', 'USAGE'), has_table_privilege('"+roleB+"', '"+sa+".secret', 'SELECT'))"))
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_largeobject_metadata"))
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_default_acl"))
		})
	}
	// publicGrants counts the grants of a's table to PUBLIC.
	publicGrants := func(t *testing.T) string {
		return e.adminValue(t, "SELECT count(*)::text FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = '"+sa+".secret'::regclass AND a.grantee = 0")
	}
	// The COMMIT runs a held cursor's query to its end: a call that wrote
	// nothing, so that the host checks nothing, would grant there. The
	// host closes the cursors before its COMMIT, and makes it read-only,
	// which a RESET turns off on PostgreSQL 15: so the second case fails
	// without the first line, the first without either.
	for name, reset := range map[string]string{
		"a cursor WITH HOLD runs nothing at the commit":                          "",
		"a cursor WITH HOLD that turns read-only off runs nothing at the commit": "RESET transaction_read_only; ",
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, call(t, a, `CREATE FUNCTION late() RETURNS integer LANGUAGE plpgsql AS $$
				BEGIN `+reset+`GRANT SELECT ON secret TO PUBLIC; INSERT INTO secret VALUES ('late'); RETURN 1; END $$`))
			defer call(t, a, "DROP FUNCTION late()")
			err := call(t, a, "DECLARE held CURSOR WITH HOLD FOR SELECT late()")
			if err != nil {
				assert.Contains(t, err.Error(), "read-only")
			}
			assert.Equal(t, "0", publicGrants(t), "the cursor granted at the commit")
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM "+sa+".secret WHERE x = 'late'"))
		})
	}
	t.Run("a trigger deferred again past the host's rounds", func(t *testing.T) {
		// A TRUNCATE resets a table's counters, so that a round that wrote
		// a row to one table and truncated another wrote nothing by the
		// counters: the rounds go by command ids, which nothing lowers.
		// The trigger deferred again turns the COMMIT's read-only off
		// (RESET may, on PostgreSQL 15): only the rounds stop it.
		err := call(t, a, "CREATE TABLE c (x integer)", "CREATE TABLE relay (x integer)", "CREATE TABLE relay2 (x integer)",
			`CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`,
			`CREATE FUNCTION regrant() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RESET transaction_read_only; GRANT SELECT ON secret TO PUBLIC; RETURN NULL; END $$`,
			`CREATE FUNCTION redefer() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN SET CONSTRAINTS ALL DEFERRED; INSERT INTO relay2 VALUES (1); TRUNCATE c; RETURN NULL; END $$`,
			"CREATE TRIGGER counted BEFORE INSERT ON c FOR EACH ROW EXECUTE FUNCTION nothing()",
			"CREATE CONSTRAINT TRIGGER first AFTER INSERT ON relay DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION redefer()",
			"CREATE CONSTRAINT TRIGGER second AFTER INSERT ON relay2 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION regrant()",
			"INSERT INTO c VALUES (1)", "INSERT INTO relay VALUES (1)")
		require.ErrorIs(t, err, ErrShared)
		assert.Equal(t, "0", publicGrants(t), "the trigger granted at the commit")
		assert.Equal(t, "<null>", e.adminValue(t, "SELECT to_regclass('"+sa+".relay')::text"), "the call committed")
	})
	t.Run("a cursor WITH HOLD before the plugin's own COMMIT", func(t *testing.T) {
		// The plugin's COMMIT runs the held cursor's query: the cursor
		// arms the commit guard, as a write does, whose trigger fails that
		// COMMIT before the query runs.
		require.NoError(t, call(t, a, `CREATE FUNCTION late() RETURNS integer LANGUAGE plpgsql AS $$
			BEGIN GRANT SELECT ON secret TO PUBLIC; INSERT INTO secret VALUES ('late'); RETURN 1; END $$`))
		defer call(t, a, "DROP FUNCTION late()")
		c := e.begin(a, t, g)
		_, err := c.sql(a, "DECLARE held CURSOR WITH HOLD FOR SELECT late()", "COMMIT")
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		require.Error(t, c.end(a, true))
		assert.Equal(t, "0", publicGrants(t), "the cursor granted in the plugin's COMMIT")
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM "+sa+".secret WHERE x = 'late'"))
	})
	t.Run("in a run, with the session row", func(t *testing.T) {
		tx := txn.New()
		tctx := txn.With(a, tx)
		c := e.begin(tctx, t, g)
		c.must(tctx, "INSERT INTO secret VALUES ('more')", "GRANT SELECT ON secret TO PUBLIC")
		require.NoError(t, c.end(tctx, true))
		require.NoError(t, tx.Put(ctx, txn.PostgresTarget("main"), txn.Sessions, "bridged", 1, []byte(`{}`)))
		require.ErrorIs(t, tx.Commit(ctx), ErrShared)
		assert.Equal(t, "<no row>", e.adminValue(t, "SELECT id FROM wasmhist.sessions WHERE id = 'bridged'"))
		assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM "+sa+".secret"))
	})
	t.Run("membership", func(t *testing.T) {
		c := e.begin(a, t, g)
		_, err := c.sql(a, "GRANT "+roleName(db, sa)+" TO "+roleB)
		c.end(a, true)
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_auth_members WHERE member = '"+roleB+"'::regrole"))
	})
}
