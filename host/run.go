package host

import (
	"context"
	"errors"

	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// InRun runs f with a context whose plugin calls form one run, as an agent
// run's do: what they write into granted databases stays in one
// transaction per database (each call inside a savepoint) and commits
// once, when f returns nil and commit is set, or is rolled back otherwise.
// It returns f's error, joined with the rollback's, or the commit's.
// Package host/agent does this for every run; InRun is for other groups of
// calls, such as the conformance suite's failure cases.
func InRun(ctx context.Context, commit bool, f func(ctx context.Context) error) error {
	tx := txn.New()
	if err := f(txn.With(ctx, tx)); err != nil || !commit {
		return errors.Join(err, tx.Rollback(ctx))
	}
	return tx.Commit(ctx)
}
