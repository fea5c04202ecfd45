package txn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// part records what a Txn did to it.
type part struct {
	name      string
	log       *[]string
	commitErr error
}

func (p *part) Put(context.Context, txn.Table, string, int64, []byte) error { return nil }
func (p *part) Get(context.Context, txn.Table, string) (int64, []byte, error) {
	return 0, nil, txn.ErrNotFound
}
func (p *part) Delete(context.Context, txn.Table, string) error { return nil }
func (p *part) Commit(context.Context) error {
	*p.log = append(*p.log, "commit "+p.name)
	return p.commitErr
}
func (p *part) Rollback(context.Context) error {
	*p.log = append(*p.log, "rollback "+p.name)
	return nil
}

func TestCommitInJoinOrderAndReuse(t *testing.T) {
	ctx := context.Background()
	var log []string
	tx := txn.New()
	require.NoError(t, tx.Join("a", &part{"a", &log, nil}))
	require.NoError(t, tx.Join("b", &part{"b", &log, nil}))
	require.Error(t, tx.Join("a", &part{"a", &log, nil}), "a target joins once")
	assert.Equal(t, []string{"a", "b"}, tx.Targets())
	require.NoError(t, tx.Commit(ctx))
	assert.Equal(t, []string{"commit a", "commit b"}, log)
	assert.Empty(t, tx.Targets(), "a committed Txn is empty and serves the next unit")
	require.NoError(t, tx.Join("a", &part{"a", &log, nil}))
	require.NoError(t, tx.Rollback(ctx))
	assert.Equal(t, "rollback a", log[len(log)-1])
	require.NoError(t, tx.Rollback(ctx), "rolling back an empty Txn does nothing")
	assert.ErrorIs(t, tx.Put(ctx, "a", txn.Sessions, "s", 1, nil), txn.ErrNoTarget)
}

func TestCommitFailureRollsBackTheRest(t *testing.T) {
	ctx := context.Background()
	var log []string
	boom := errors.New("disk full")
	tx := txn.New()
	require.NoError(t, tx.Join("a", &part{"a", &log, nil}))
	require.NoError(t, tx.Join("b", &part{"b", &log, boom}))
	require.NoError(t, tx.Join("c", &part{"c", &log, nil}))
	err := tx.Commit(ctx)
	var ce *txn.CommitError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, "b", ce.Target)
	assert.Equal(t, []string{"a"}, ce.Committed)
	assert.Equal(t, []string{"commit a", "commit b", "rollback c"}, log)
}

func TestFailedTxnRollsBack(t *testing.T) {
	ctx := context.Background()
	var log []string
	tx := txn.New()
	require.NoError(t, tx.Join("a", &part{"a", &log, nil}))
	tx.Fail(errors.New("statement interrupted"))
	err := tx.Commit(ctx)
	require.ErrorContains(t, err, "statement interrupted")
	assert.Equal(t, []string{"rollback a"}, log)
	assert.NoError(t, tx.Err(), "the next unit starts clean")
}

func TestFaultStopsCommit(t *testing.T) {
	ctx := context.Background()
	var log []string
	tx := txn.New()
	require.NoError(t, tx.Join("a", &part{"a", &log, nil}))
	require.NoError(t, tx.Join("b", &part{"b", &log, nil}))
	txn.SetFault(tx, func(s txn.Step) error {
		if s == txn.StepAfterSQLCommit {
			return errors.New("crash")
		}
		return nil
	})
	var ce *txn.CommitError
	require.ErrorAs(t, tx.Commit(ctx), &ce)
	assert.Equal(t, []string{"a"}, ce.Committed)
	assert.Equal(t, []string{"commit a", "rollback b"}, log)
}

// ctxPart records the contexts a Txn gives it.
type ctxPart struct {
	part
	commitCtx, rollbackCtx context.Context
	commitErr              error // commitCtx.Err() during Commit
}

func (p *ctxPart) Commit(ctx context.Context) error {
	p.commitCtx, p.commitErr = ctx, ctx.Err()
	return p.part.Commit(ctx)
}

func (p *ctxPart) Rollback(ctx context.Context) error {
	p.rollbackCtx = ctx
	return p.part.Rollback(ctx)
}

// TestCommitKeepsTheDeadline: a participant commits within the run's
// remaining time, even when the run's context is already cancelled;
// rollbacks have no deadline, so they run even after it.
func TestCommitKeepsTheDeadline(t *testing.T) {
	var log []string
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	cancel()
	a, b := &ctxPart{part: part{"a", &log, nil}}, &ctxPart{part: part{"b", &log, errors.New("boom")}}
	tx := txn.New()
	require.NoError(t, tx.Join("a", a))
	require.NoError(t, tx.Join("b", b))
	require.NoError(t, tx.Join("c", &ctxPart{part: part{"c", &log, nil}}))
	require.Error(t, tx.Commit(ctx))
	dl, ok := a.commitCtx.Deadline()
	require.True(t, ok, "the commit's context has no deadline")
	assert.Equal(t, deadline, dl)
	assert.NoError(t, a.commitErr, "a cancelled run still commits")
	tx2 := txn.New()
	c := &ctxPart{part: part{"c", &log, nil}}
	require.NoError(t, tx2.Join("c", c))
	require.NoError(t, tx2.Rollback(ctx))
	_, ok = c.rollbackCtx.Deadline()
	assert.False(t, ok, "a rollback's context has a deadline")
}

// sqlStateError is an error with a SQLSTATE, as pgconn's.
type sqlStateError string

func (e sqlStateError) Error() string    { return "sqlstate " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

func TestPostgresRetry(t *testing.T) {
	for _, tt := range []struct {
		err   error
		calls int
	}{
		{sqlStateError("XX000"), 5}, // tuple concurrently updated: every try
		{sqlStateError("40P01"), 5},
		{sqlStateError("42501"), 1}, // a refusal is not a race
		{errors.New("connection lost"), 1},
		{nil, 1},
	} {
		calls := 0
		err := txn.PostgresRetry(context.Background(), func() error { calls++; return tt.err })
		assert.Equal(t, tt.calls, calls, "%v", tt.err)
		assert.Equal(t, tt.err, err)
	}
	calls := 0
	err := txn.PostgresRetry(context.Background(), func() error {
		if calls++; calls < 3 {
			return sqlStateError("XX000")
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
}
