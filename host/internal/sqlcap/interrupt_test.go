package sqlcap

import (
	"context"
	"testing"
	"time"

	"database/sql/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	sqlite3 "modernc.org/sqlite/lib"
)

// requestOn opens a session on p, begins its transaction and arms its
// connection's interrupter with a context the test ends, as run does; the
// returned context is the one run gives the statements (it never ends).
func requestOn(t *testing.T, s *Store, p string, write bool) (*session, *conn, context.Context, context.CancelFunc) {
	t.Helper()
	ctx := context.Background()
	cs, err := NewGrant(FixedPath(p), Limits{}).Begin(ctx, s)
	require.NoError(t, err)
	sess := cs.(*session)
	t.Cleanup(func() { sess.End(ctx, false) })
	require.NoError(t, sess.begin(ctx, write))
	c, err := sess.driverConn()
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	stop := c.intr.watch(rctx, c.callTLS())
	t.Cleanup(stop)
	t.Cleanup(cancel)
	return sess, c, context.WithoutCancel(rctx), cancel
}

// interruptNow ends the request and waits until its watcher has
// interrupted the connection, while no statement runs: SQLite drops that
// interrupt when the next statement starts.
func interruptNow(c *conn, cancel context.CancelFunc) {
	cancel()
	<-c.intr.done
}

// TestInterruptBetweenStatements: a deadline that passes between two
// statements of a request stops the second, although SQLite forgot the
// interrupt; the insert it would have made is not there.
func TestInterruptBetweenStatements(t *testing.T) {
	s := newStore(t, Limits{})
	p := dbPath(t, "between.db")
	oneCall(t, s, p, "CREATE TABLE t(x)")
	sess, c, ctx, cancel := requestOn(t, s, p, true)
	out := newResultWriter(sess.limits)
	require.NoError(t, sess.exec(ctx, c, statement{SQL: "INSERT INTO t VALUES (1)"}, out))
	interruptNow(c, cancel)
	err := sess.exec(ctx, c, statement{SQL: "INSERT INTO t VALUES (2)"}, out)
	require.ErrorIs(t, err, errInterrupted)
	ae, poison := sess.mapError(ctx, err)
	assert.ErrorIs(t, ae, abi.ErrResourceExhausted)
	assert.True(t, poison, "an interrupted request poisons the call")
	got, err := c.query(context.Background(), "SELECT group_concat(x) FROM t", nil, false)
	require.NoError(t, err)
	defer got.Close()
	row := make([]driver.Value, 1)
	require.NoError(t, got.Next(row))
	assert.Equal(t, "1", row[0], "the second insert ran")
}

// TestInterruptBeforeFirstStep: a statement that passed the check just
// before the deadline and takes its first step just after it, when SQLite
// has dropped the interrupt, is stopped by the progress handler within
// the bound, not run to its end.
func TestInterruptBeforeFirstStep(t *testing.T) {
	s := newStore(t, Limits{})
	p := dbPath(t, "firststep.db")
	oneCall(t, s, p, "CREATE TABLE t(x)")
	_, c, ctx, cancel := requestOn(t, s, p, false)
	interruptNow(c, cancel)
	start := time.Now()
	// Seconds of work uninterrupted.
	rows, err := c.query(ctx, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 5000000) SELECT count(*) FROM c", nil, true)
	if err == nil {
		row := make([]driver.Value, 1)
		err = rows.Next(row)
		rows.Close()
	}
	require.Error(t, err, "the statement ran to its end after the deadline")
	assert.Equal(t, sqlite3.SQLITE_INTERRUPT, sqliteCode(err), "%v", err)
	assert.Less(t, time.Since(start), 2*time.Second, "stopped too late")
}

// TestRequestPastItsDeadline: a request whose call's deadline has passed
// is refused before any statement runs, its insert not made, although no
// statement ran for SQLite to interrupt.
func TestRequestPastItsDeadline(t *testing.T) {
	s := newStore(t, Limits{})
	p := dbPath(t, "past.db")
	oneCall(t, s, p, "CREATE TABLE t(x)")
	c := begin(t, s, p)
	_, err := c.do(context.Background(), abi.SQLRequest{Write: true, Statements: []abi.SQLStatement{{SQL: "SELECT 1"}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.do(ctx, req("INSERT INTO t VALUES (1)"))
	require.ErrorIs(t, err, abi.ErrResourceExhausted)
	c.call.End(context.Background(), false)
	got := oneCall(t, s, p, "SELECT count(*) FROM t").Results[0].Rows[0][0]
	assert.Equal(t, "0", string(got))
}

// TestLateWatcherSparesTheNextRequest: the watcher of a request whose
// deadline passed as it ended may run after the next request on the
// connection was armed (context.AfterFunc's cancel does not wait for a
// goroutine that started); it must not stop that request, whose call would
// then be charged resource_exhausted for a deadline it never had.
func TestLateWatcherSparesTheNextRequest(t *testing.T) {
	s := newStore(t, Limits{})
	p := dbPath(t, "late.db")
	oneCall(t, s, p, "CREATE TABLE t(x)")
	sess, c, _, cancel := requestOn(t, s, p, false)
	c.intr.mu.Lock()
	first := c.intr.req
	c.intr.mu.Unlock()
	cancel() // the first request's deadline: its watcher starts
	<-c.intr.done

	stop := c.intr.watch(context.Background(), c.callTLS()) // the next request
	defer stop()
	c.intr.interrupt(first) // the first request's watcher, run late
	require.NoError(t, c.intr.check(), "a late watcher stopped the next request")
	out := newResultWriter(sess.limits)
	require.NoError(t, sess.exec(context.Background(), c, statement{SQL: "SELECT count(*) FROM t"}, out))
}
