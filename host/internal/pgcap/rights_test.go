package pgcap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// TestPluginRights: a plugin that uses every right the owner of its schema
// has (functions and operators in its schema, its own search_path and
// role settings, deferred triggers, advisory locks) can neither commit
// outside the host's commit, nor hold the host's commit or provisioning
// past the limits, nor change how the next call or host runs.
func TestPluginRights(t *testing.T) {
	srv := pgtest.Start(t)
	e := &env{dsn: srv.DSN("postgres"), store: NewStore()}
	t.Cleanup(func() { e.store.Close() })
	var err error
	e.admin, err = pgx.Connect(t.Context(), e.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { e.admin.Close(context.Background()) })

	t.Run("host SQL ignores the plugin's search path", func(t *testing.T) { testShadowing(t, e) })
	t.Run("a bounded commit", func(t *testing.T) { testBoundedCommit(t, e) })
	t.Run("no lock of the host's", func(t *testing.T) { testHostLock(t, e) })
	t.Run("a dead host's statement ends", func(t *testing.T) { testDeadClient(t, e) })
	t.Run("no persistent role settings", func(t *testing.T) { testRoleSettings(t, e) })
}

// shadows are functions and operators of the plugin's schema named like
// every one the host's SQL uses, each answering what would let a write
// past the commit guard.
var shadows = []string{
	"CREATE FUNCTION pg_current_xact_id_if_assigned() RETURNS xid8 LANGUAGE sql AS 'SELECT NULL::xid8'",
	"CREATE FUNCTION pg_current_xact_id() RETURNS xid8 LANGUAGE sql AS 'SELECT NULL::xid8'",
	"CREATE FUNCTION set_config(text, text, boolean) RETURNS text LANGUAGE sql AS 'SELECT $2'",
	"CREATE FUNCTION current_setting(text) RETURNS text LANGUAGE sql AS 'SELECT NULL::text'",
	"CREATE FUNCTION current_setting(text, boolean) RETURNS text LANGUAGE sql AS 'SELECT NULL::text'",
	"CREATE FUNCTION sha256(bytea) RETURNS bytea LANGUAGE sql AS 'SELECT $1'",
	"CREATE FUNCTION yes(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
	"CREATE FUNCTION yes(bytea, bytea) RETURNS boolean LANGUAGE sql AS 'SELECT true'",
	"CREATE FUNCTION no(bytea, bytea) RETURNS boolean LANGUAGE sql AS 'SELECT false'",
	"CREATE OPERATOR = (LEFTARG = text, RIGHTARG = text, FUNCTION = yes)",
	"CREATE OPERATOR = (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = yes)",
	"CREATE OPERATOR <> (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = no)",
}

func testShadowing(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("shadow", Limits{})
	e.oneCall(t, g, append([]string{"CREATE TABLE t (x integer)"}, shadows...)...)
	count := func(t *testing.T) string { return e.adminValue(t, "SELECT count(*)::text FROM shadow.t") }
	for _, path := range []string{"shadow, pg_catalog", "shadow, pg_catalog, wasmhist", "shadow, wasmhist, pg_catalog"} {
		setPath := fmt.Sprintf("SELECT pg_catalog.set_config('search_path', '%s', false)", path)
		t.Run(path+": the plugin's commit commits nothing", func(t *testing.T) {
			c := e.begin(ctx, t, g)
			c.must(ctx, setPath, "INSERT INTO t VALUES (1)")
			_, err := c.sql(ctx, "COMMIT")
			require.ErrorIs(t, err, abi.ErrPermissionDenied)
			require.ErrorIs(t, c.end(ctx, true), abi.ErrPermissionDenied)
			assert.Equal(t, "0", count(t), "the plugin committed its write")
		})
		t.Run(path+": the host's commit", func(t *testing.T) {
			e.oneCall(t, g, setPath, "INSERT INTO t VALUES (2)")
			assert.Equal(t, "1", count(t))
			_, err := e.admin.Exec(ctx, "DELETE FROM shadow.t")
			require.NoError(t, err)
		})
		t.Run(path+": the host's rows in the run's transaction", func(t *testing.T) {
			tx := txn.New()
			tctx := txn.With(ctx, tx)
			c := e.begin(tctx, t, g)
			c.must(tctx, setPath, "INSERT INTO t VALUES (3)")
			require.NoError(t, c.end(tctx, true))
			require.NoError(t, tx.Put(ctx, txn.PostgresTarget("main"), txn.Sessions, "shadow", 1, []byte(`{}`)))
			// A later call of the run, after the host's rows: its COMMIT
			// must not pass either.
			c = e.begin(tctx, t, g)
			_, err := c.sql(tctx, "COMMIT")
			require.ErrorIs(t, err, abi.ErrPermissionDenied)
			require.Error(t, c.end(tctx, true))
			require.Error(t, tx.Commit(ctx))
			assert.Equal(t, "0", count(t))
			assert.Equal(t, "<no row>", e.adminValue(t, "SELECT revision::text FROM wasmhist.sessions WHERE id = 'shadow'"))
		})
	}
	assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM wasmhist.commit_guard"))
}

// sleeper creates, in the plugin's schema, table name whose inserts run a
// deferred constraint trigger that sleeps 8 s, catching cancellations
// when swallow is set.
func sleeper(name string, swallow bool) []string {
	body := "PERFORM pg_sleep(8);"
	if swallow {
		body = `FOR i IN 1..80 LOOP
			BEGIN PERFORM pg_sleep(0.1); EXCEPTION WHEN query_canceled THEN NULL; END;
		END LOOP;`
	}
	return []string{
		"CREATE TABLE " + name + " (x integer)",
		"CREATE FUNCTION " + name + "_slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " + body + " RETURN NULL; END $$",
		"CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON " + name + " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + name + "_slow()",
	}
}

func testBoundedCommit(t *testing.T, e *env) {
	ctx := context.Background()
	const limit = time.Second
	g := e.grant("bounded", Limits{Timeout: limit})
	var setup []string
	for _, swallow := range []bool{false, true} {
		setup = append(setup, sleeper(fmt.Sprintf("sleepy_%t", swallow), swallow)...)
	}
	// A deferred trigger that defers again and queues the sleeper's work for
	// the COMMIT itself.
	setup = append(setup,
		"CREATE TABLE again (x integer)",
		`CREATE FUNCTION again() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			SET CONSTRAINTS ALL DEFERRED;
			SET LOCAL client_connection_check_interval = 0;
			INSERT INTO sleepy_true VALUES (1);
			RETURN NULL; END $$`,
		"CREATE CONSTRAINT TRIGGER again AFTER INSERT ON again DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION again()",
	)
	e.oneCall(t, g, append(setup,
		"CREATE TABLE seen (token text)",
		`CREATE FUNCTION spy() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			INSERT INTO seen SELECT current_setting(name) FROM pg_settings WHERE name LIKE 'wasmhist.%';
			INSERT INTO seen VALUES (current_setting('wasmhist.commit_token', true));
			RETURN NULL; END $$`,
		"CREATE TABLE spied (x integer)",
		"CREATE CONSTRAINT TRIGGER spy AFTER INSERT ON spied DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION spy()",
	)...)
	role := e.adminValue(t, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'bounded'")
	// The call may take 5 s in all; each step, the request limit (1 s). The
	// host returns at most a second after a limit (the cancel's grace).
	const slack = 2 * time.Second
	for _, tt := range []struct {
		name  string
		table string
		txn   bool
	}{
		{"deferred trigger", "sleepy_false", false},
		{"deferred trigger catching cancels", "sleepy_true", false},
		{"deferred trigger, in a run", "sleepy_false", true},
		{"deferred trigger catching cancels, in a run", "sleepy_true", true},
		{"deferred trigger deferring to the commit", "again", false},
		{"deferred trigger deferring to the commit, in a run", "again", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			tx := txn.New()
			defer tx.Rollback(ctx)
			if tt.txn {
				cctx = txn.With(cctx, tx)
			}
			c := e.begin(cctx, t, g)
			c.must(cctx, "SELECT pg_catalog.set_config('statement_timeout', '0', false)", "INSERT INTO "+tt.table+" VALUES (1)")
			start := time.Now()
			err := c.end(cctx, true)
			if tt.txn {
				require.NoError(t, err)
				// Fails in the step before the session row, or (work the
				// plugin deferred again) in the COMMIT.
				err = tx.Put(cctx, txn.PostgresTarget("main"), txn.Sessions, "bounded", 1, []byte(`{}`))
				if err != nil {
					assert.Contains(t, err.Error(), "deferred triggers")
					require.Error(t, tx.Commit(cctx))
				} else {
					err = tx.Commit(cctx)
				}
			}
			elapsed := time.Since(start)
			require.ErrorIs(t, err, abi.ErrResourceExhausted)
			assert.Less(t, elapsed, limit+slack, "the commit step ran past the request limit")
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM bounded."+tt.table), "committed")
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM bounded.sleepy_true"), "committed")
			assert.Equal(t, "<no row>", e.adminValue(t, "SELECT revision::text FROM wasmhist.sessions WHERE id = 'bounded'"))
			// And the server stopped the trigger, although it went on past
			// the cancel.
			assert.Eventually(t, func() bool {
				return e.adminValue(t, "SELECT count(*)::text FROM pg_stat_activity WHERE usename = '"+role+"' AND state <> 'idle'") == "0"
			}, 3*time.Second, 10*time.Millisecond, "the plugin's trigger outlived the call")
		})
	}
	t.Run("a statement catching cancels", func(t *testing.T) {
		c := e.begin(ctx, t, g)
		_, err := c.sql(ctx, `DO $$ BEGIN FOR i IN 1..80 LOOP
			BEGIN PERFORM pg_sleep(0.1); EXCEPTION WHEN query_canceled THEN NULL; END;
		END LOOP; END $$`)
		require.ErrorIs(t, err, abi.ErrResourceExhausted)
		require.Error(t, c.end(ctx, true))
		assert.Eventually(t, func() bool {
			return e.adminValue(t, "SELECT count(*)::text FROM pg_stat_activity WHERE usename = '"+role+"' AND state <> 'idle'") == "0"
		}, 3*time.Second, 10*time.Millisecond, "the plugin's statement outlived the call")
	})
	t.Run("the commit token is not readable", func(t *testing.T) {
		e.oneCall(t, g, "INSERT INTO spied VALUES (1)")
		assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM bounded.seen"))
		assert.Equal(t, "<null>", e.adminValue(t, "SELECT max(token) FROM bounded.seen"))
	})
	t.Run("the plugin's deferred constraints still hold", func(t *testing.T) {
		e.oneCall(t, g, "CREATE TABLE parent (id integer PRIMARY KEY)",
			"CREATE TABLE child (parent integer REFERENCES parent DEFERRABLE INITIALLY DEFERRED)")
		c := e.begin(ctx, t, g)
		c.must(ctx, "INSERT INTO child VALUES (1)")
		require.ErrorIs(t, c.end(ctx, true), abi.ErrFailedPrecondition)
		e.oneCall(t, g, "INSERT INTO child VALUES (2)", "INSERT INTO parent VALUES (2)")
		assert.Equal(t, "2", e.adminValue(t, "SELECT string_agg(parent::text, ',') FROM bounded.child"))
	})
}

func testHostLock(t *testing.T, e *env) {
	ctx := context.Background()
	// The plugin holds the keys of the host's former advisory locks, for
	// a minute, in a call still running.
	holder := e.grant("holder", Limits{Timeout: time.Minute})
	e.oneCall(t, holder, "SELECT 1")
	role := e.adminValue(t, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'holder'")
	hctx, stop := context.WithCancel(ctx)
	c := e.begin(hctx, t, holder)
	c.must(hctx, "SELECT pg_advisory_lock(hashtext('wasmhist pgstore ' || 'wasmhist'))",
		"SELECT pg_advisory_lock(hashtext('wasmhist role ' || '"+roleName("postgres", "newcomer")+"'))")
	done := make(chan error, 1)
	go func() {
		_, err := c.sql(hctx, "SELECT pg_sleep(60)")
		done <- err
	}()
	defer func() {
		stop()
		<-done
	}()
	require.Eventually(t, func() bool {
		return e.adminValue(t, "SELECT count(*)::text FROM pg_stat_activity WHERE usename = '"+role+"' AND query LIKE '%pg_sleep(60)%' AND state = 'active'") == "1"
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "2", e.adminValue(t, "SELECT count(*)::text FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND a.usename = '"+role+"'"))

	// A new host provisions a new tenant promptly.
	s2 := NewStore()
	defer s2.Close()
	e2 := &env{dsn: e.dsn, store: s2, admin: e.admin}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c2 := e2.begin(pctx, t, e.grant("newcomer", Limits{}))
	_, err := c2.sql(pctx, "CREATE TABLE t (x integer)")
	require.NoError(t, err)
	require.NoError(t, c2.end(pctx, true))
	assert.Less(t, time.Since(start), 5*time.Second)

	// The host's lock itself is out of the plugin's reach.
	for _, q := range []string{
		"SELECT * FROM wasmhist.host_lock FOR UPDATE",
		"SELECT * FROM wasmhist.host_lock FOR KEY SHARE",
		"LOCK TABLE wasmhist.host_lock IN ACCESS EXCLUSIVE MODE",
		"LOCK TABLE wasmhist.host_lock IN ACCESS SHARE MODE",
		"TRUNCATE wasmhist.host_lock",
		"DELETE FROM wasmhist.host_lock",
	} {
		c := e.begin(ctx, t, e.grant("newcomer", Limits{}))
		_, err := c.sql(ctx, q)
		require.ErrorIs(t, err, abi.ErrPermissionDenied, q)
		c.end(ctx, false)
	}
}

// testDeadClient: the backend of a host that died (its socket closed
// without a cancel, as when the process is killed) stops its statement
// within the connection check interval.
func testDeadClient(t *testing.T, e *env) {
	ctx := context.Background()
	e.oneCall(t, e.grant("orphan", Limits{}), "SELECT 1")
	db, err := e.store.database(ctx, &Config{Name: "main", AdminDSN: e.dsn, Schema: "orphan"})
	require.NoError(t, err)
	r, err := db.role(ctx, "orphan")
	require.NoError(t, err)
	// A connection as the host makes them, which cannot send a cancel
	// request once its host is "dead": a killed process sends none.
	cfg := r.pool.Config().ConnConfig.Copy()
	var dialed atomic.Bool
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dialed.Swap(true) {
			return nil, errors.New("the host is dead")
		}
		return dial(ctx, network, addr)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	pc := conn.PgConn()
	pid := pc.PID()
	// No statement timeout: only the connection check ends the statement.
	_, err = pc.Exec(ctx, "SET statement_timeout = 0; BEGIN").ReadAll()
	require.NoError(t, err)
	go pc.Exec(ctx, "SELECT pg_sleep(60)").ReadAll()
	active := fmt.Sprintf("SELECT count(*)::text FROM pg_stat_activity WHERE pid = %d AND state = 'active'", pid)
	require.Eventually(t, func() bool { return e.adminValue(t, active) == "1" }, 10*time.Second, 10*time.Millisecond)
	start := time.Now()
	require.NoError(t, pc.Conn().Close())
	require.Eventually(t, func() bool {
		return e.adminValue(t, fmt.Sprintf("SELECT count(*)::text FROM pg_stat_activity WHERE pid = %d", pid)) == "0"
	}, 4*time.Second, 10*time.Millisecond, "the backend outlived its client (client_connection_check_interval is 1 s)")
	t.Logf("backend gone %s after its client", time.Since(start))
}

func testRoleSettings(t *testing.T, e *env) {
	ctx := context.Background()
	g := e.grant("settings", Limits{})
	e.oneCall(t, g, "CREATE TABLE t (x integer)")
	role := e.adminValue(t, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'settings'")
	settings := []string{
		"SET default_transaction_read_only = on",
		"SET idle_in_transaction_session_timeout = '1ms'",
		"SET statement_timeout = '1ms'",
		"SET work_mem = '2000GB'",
		"SET search_path = pg_catalog",
		"SET client_connection_check_interval = 0",
	}
	// A run that sets them is refused and rolled back (see
	// testOutbound); settings on the role from anywhere else change
	// nothing either: the connection pins its own.
	var alter []string
	for _, set := range settings {
		alter = append(alter, "ALTER ROLE CURRENT_USER "+set)
	}
	c := e.begin(ctx, t, g)
	c.must(ctx, alter...)
	require.ErrorIs(t, c.end(ctx, true), ErrRoleChanged, "a run that set its role's settings")
	var left []string
	for _, set := range settings {
		left = append(left, "ALTER ROLE "+role+" "+set)
	}
	left = append(left, "ALTER ROLE "+role+" IN DATABASE postgres SET default_transaction_read_only = on")
	e.superExec(t, left...)
	check := func(t *testing.T, e *env) {
		t.Helper()
		c := e.begin(ctx, t, g)
		c.must(ctx, "CREATE TABLE IF NOT EXISTS u (x integer)", "INSERT INTO t VALUES (1)")
		resp := c.must(ctx, "SELECT current_setting('default_transaction_read_only'), current_setting('idle_in_transaction_session_timeout'), "+
			"current_setting('work_mem'), current_setting('search_path'), current_setting('client_connection_check_interval')")
		require.NoError(t, c.end(ctx, true))
		assert.JSONEq(t, `["off", "1h", "4MB", "settings", "1s"]`, mustJSON(resp.Results[0].Rows[0]))
	}
	t.Run("the next call", func(t *testing.T) {
		db, err := e.store.database(ctx, &Config{Name: "main", AdminDSN: e.dsn, Schema: "settings"})
		require.NoError(t, err)
		r, err := db.role(ctx, "settings")
		require.NoError(t, err)
		r.pool.Reset() // new connections, which read the role's settings
		check(t, e)
	})
	t.Run("the next host", func(t *testing.T) {
		s2 := NewStore()
		defer s2.Close()
		check(t, &env{dsn: e.dsn, store: s2, admin: e.admin})
		assert.Equal(t, "search_path=settings", e.adminValue(t,
			"SELECT string_agg(c, ' ') FROM pg_db_role_setting, unnest(setconfig) c WHERE setrole = '"+role+"'::regrole"),
			"the plugin's role settings outlived provisioning")
	})
}
