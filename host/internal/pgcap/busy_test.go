package pgcap

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// waitForLockWaiter returns once a backend of schema's role waits for a
// lock.
func (e *env) waitForLockWaiter(t *testing.T, schema string) {
	t.Helper()
	q := `SELECT count(*)::text FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE NOT l.granted AND a.usename = '` + roleName(e.adminValue(t, "SELECT current_database()"), schema) + `'`
	require.Eventually(t, func() bool { return e.adminValue(t, q) != "0" }, 10*time.Second, 5*time.Millisecond,
		"the second call never waited for the lock")
}

// testLockWait: a plugin statement waiting for a row lock another run
// holds (two runs of one session) waits on the host's time: neither the
// request's limit nor the call's deadline runs meanwhile; past the lock
// wait the call fails with txn.ErrBusy, not with the plugin's error.
func testLockWait(t *testing.T, e *env) {
	ctx := context.Background()
	const limit = 300 * time.Millisecond
	g := NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "lockwait", Limits: Limits{Timeout: limit}, LockWait: 2 * time.Second})
	// The tables, within the default limits: a loaded machine's DDL is
	// not what this case is about.
	e.oneCall(t, e.grant("lockwait", Limits{}), "CREATE TABLE seq (k integer PRIMARY KEY, n integer NOT NULL)", "INSERT INTO seq VALUES (1, 0)", "CREATE TABLE log (x integer)")

	t.Run("a wait longer than the limits is not charged", func(t *testing.T) {
		// The first run updates the session's row and keeps it locked
		// through its model call.
		first := e.begin(ctx, t, g)
		first.must(ctx, "UPDATE seq SET n = n + 1 WHERE k = 1")
		// The second's call has a deadline of 1 s, as the host gives a
		// plugin's export call (a pausable clock).
		cctx, cancel := capability.WithClock(ctx, time.Second)
		defer cancel()
		second := e.begin(cctx, t, g)
		type result struct {
			resp *abi.SQLResponse
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := second.sql(cctx, "UPDATE seq SET n = n + 1 WHERE k = 1 RETURNING n")
			done <- result{resp, err}
		}()
		e.waitForLockWaiter(t, "lockwait")
		// The first run holds the row well past the request's limit and
		// the second call's deadline before it commits.
		<-time.After(4 * limit)
		require.NoError(t, first.end(ctx, true))
		r := <-done
		require.NoError(t, r.err, "a lock wait was charged to the plugin")
		assert.JSONEq(t, `[[2]]`, mustJSON(r.resp.Results[0].Rows))
		require.NoError(t, cctx.Err(), "the call's clock ran while its statement waited")
		require.NoError(t, second.end(cctx, true))
		assert.Equal(t, "2", e.adminValue(t, "SELECT n::text FROM lockwait.seq"))
	})

	t.Run("a wait past the lock wait is busy", func(t *testing.T) {
		tx, err := e.admin.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, "LOCK TABLE lockwait.seq IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)
		c := e.begin(ctx, t, g)
		c.must(ctx, "INSERT INTO log VALUES (1)")
		start := time.Now()
		// The plugin turning its own lock_timeout off changes nothing.
		_, err = c.sql(ctx, "SET lock_timeout = 0", "SELECT * FROM seq")
		took := time.Since(start)
		require.ErrorIs(t, err, abi.ErrUnavailable)
		require.NotErrorIs(t, err, abi.ErrResourceExhausted)
		assert.ErrorContains(t, err, "busy")
		require.ErrorIs(t, c.call.Fault(), txn.ErrBusy, "the call fails with the host's error")
		assert.ErrorContains(t, c.call.Fault(), "run again")
		assert.GreaterOrEqual(t, took, 2*time.Second)
		assert.Less(t, took, 4*time.Second)
		// The request after it repeats the error; nothing of the call
		// commits.
		_, err = c.sql(ctx, "SELECT 1")
		require.ErrorIs(t, err, abi.ErrUnavailable)
		require.ErrorIs(t, c.end(ctx, true), txn.ErrBusy)
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM lockwait.log"))
	})

	t.Run("provisioning behind another host is not charged", func(t *testing.T) {
		// Another host provisions, holding the host schema's lock past
		// the call's deadline, while this host's first call of a new
		// schema provisions its role.
		tx, err := e.admin.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, txn.PostgresLock("wasmhist"))
		require.NoError(t, err)
		fresh := *e
		fresh.store = NewStore()
		defer fresh.store.Close()
		cctx, cancel := capability.WithClock(ctx, time.Second)
		defer cancel()
		c := fresh.begin(cctx, t, NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "latecomer", Limits: Limits{Timeout: limit}}))
		done := make(chan error, 1)
		go func() {
			_, err := c.sql(cctx, "CREATE TABLE t (x integer)")
			done <- err
		}()
		waiting := `SELECT count(*)::text FROM pg_locks WHERE NOT granted` // the host lock's row
		require.Eventually(t, func() bool { return e.adminValue(t, waiting) != "0" }, 10*time.Second, 5*time.Millisecond)
		<-time.After(1500 * time.Millisecond) // past the call's deadline
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, <-done, "provisioning was charged to the plugin's call")
		require.NoError(t, cctx.Err())
		require.NoError(t, c.end(cctx, true))
	})

	t.Run("a plugin's own slow statement is still charged", func(t *testing.T) {
		c := e.begin(ctx, t, g)
		_, err := c.sql(ctx, "SELECT pg_sleep(30)")
		require.ErrorIs(t, err, abi.ErrResourceExhausted)
		require.NoError(t, c.call.Fault())
		c.end(ctx, false)
	})
}

// stuck is a statement that catches its cancellations and turns the
// server's check for a gone client off: only pg_terminate_backend, from
// the host's admin connection, ends it before its 20 s.
const stuck = `DO $$ BEGIN
	PERFORM set_config('client_connection_check_interval', '0', false);
	FOR i IN 1..200 LOOP
		BEGIN PERFORM pg_sleep(0.1); EXCEPTION WHEN query_canceled THEN NULL; END;
	END LOOP;
END $$`

// testStuckBackend: a backend that ignores its cancel is ended by the
// host, whichever admin provisioned its role.
func testStuckBackend(t *testing.T, e *env, schema string) {
	t.Helper()
	ctx := context.Background()
	// The role and schema are provisioned first, without the 300 ms
	// bound of the calls below, which a loaded machine can exceed.
	e.oneCall(t, NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: schema}), "SELECT 1")
	g := NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: schema, Limits: Limits{Timeout: 300 * time.Millisecond}})
	for attempt := 1; ; attempt++ {
		c := e.begin(ctx, t, g)
		resp, err := c.sql(ctx, "SELECT pg_backend_pid()")
		if err != nil {
			// Even this can pass 300 ms on a loaded machine.
			require.ErrorIs(t, err, abi.ErrResourceExhausted)
			require.Less(t, attempt, 5, "the backend's pid was never read within 300 ms")
			c.end(ctx, false)
			continue
		}
		var pid []int
		require.NoError(t, json.Unmarshal([]byte(mustJSON(resp.Results[0].Rows[0])), &pid))
		start := time.Now()
		_, err = c.sql(ctx, stuck)
		require.ErrorIs(t, err, abi.ErrResourceExhausted)
		state := e.adminValue(t, fmt.Sprintf("SELECT state FROM pg_stat_activity WHERE pid = %d", pid[0]))
		c.end(ctx, false)
		if strings.HasPrefix(state, "idle in transaction") {
			// The cancel ended the statement before its loop could catch
			// it (on a loaded machine the call's deadline can pass
			// before the loop begins, or land between two of its
			// sleeps): the backend was never stuck, and is the pool's.
			require.Less(t, attempt, 5, "the statement never got stuck: %v", err)
			t.Logf("attempt %d: the cancel ended the statement (%v); again", attempt, err)
			continue
		}
		require.Eventually(t, func() bool {
			return e.adminValue(t, fmt.Sprintf("SELECT count(*)::text FROM pg_stat_activity WHERE pid = %d", pid[0])) == "0"
		}, 5*time.Second, 10*time.Millisecond, "the backend outlived the host's attempt to end it (it was %q when the call gave up)", state)
		t.Logf("backend gone %s after its statement began", time.Since(start))
		return
	}
}

// testSignalRight: a CREATEROLE admin, not in pg_signal_backend, ends a
// stuck backend through its membership in the plugin's role; an admin
// whose membership gives it no privileges (NOINHERIT) is refused at
// provisioning, with the remedy, before the role has a schema.
func testSignalRight(t *testing.T, e *env, admin string) {
	ctx := context.Background()
	require.Equal(t, "false", e.adminValue(t, "SELECT pg_has_role('"+admin+"', 'pg_signal_backend', 'MEMBER')::text"))
	testStuckBackend(t, e, "stuck_inherit")
	e.superExec(t, "ALTER ROLE "+admin+" NOINHERIT")
	t.Cleanup(func() { e.superExec(t, "ALTER ROLE "+admin+" INHERIT") })
	c := e.begin(ctx, t, NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "stuck_noinherit"}))
	_, err := c.sql(ctx, "SELECT 1")
	require.ErrorIs(t, err, ErrAdminPrivileges)
	assert.ErrorContains(t, err, "ALTER ROLE "+admin+" INHERIT")
	assert.LessOrEqual(t, strings.Count(err.Error(), "\n"), 1, "at most two lines")
	c.end(ctx, false)
	assert.Equal(t, "<no row>", e.adminValue(t, "SELECT nspname::text FROM pg_namespace WHERE nspname = 'stuck_noinherit'"))
}
