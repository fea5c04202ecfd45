package pgcap

import (
	"context"
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
	e.oneCall(t, g, "CREATE TABLE seq (k integer PRIMARY KEY, n integer NOT NULL)", "INSERT INTO seq VALUES (1, 0)", "CREATE TABLE log (x integer)")

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

	t.Run("a plugin's own slow statement is still charged", func(t *testing.T) {
		c := e.begin(ctx, t, g)
		_, err := c.sql(ctx, "SELECT pg_sleep(30)")
		require.ErrorIs(t, err, abi.ErrResourceExhausted)
		require.NoError(t, c.call.Fault())
		c.end(ctx, false)
	})
}
