package main

import (
	"context"
	"errors"

	"github.com/wasmhist/wasmhist/host/txn"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// InRun groups the calls f makes in one run, as an agent run groups them,
// for the conformance suite's failure cases: the sql capability keeps their
// work in one transaction per database (host/txn), committed when f
// succeeds and commit is set, rolled back otherwise.
func (c configured) InRun(ctx context.Context, commit bool, f func(context.Context) error) error {
	tx := txn.New()
	if err := f(txn.With(ctx, tx)); err != nil || !commit {
		return errors.Join(err, tx.Rollback(ctx))
	}
	return tx.Commit(ctx)
}

var _ sdktest.RunSubject = configured{}
