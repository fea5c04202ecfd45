package main

import (
	"context"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// InRun groups the calls f makes in one run (host.InRun), for the
// conformance suite's failure cases.
func (c configured) InRun(ctx context.Context, commit bool, f func(context.Context) error) error {
	return host.InRun(ctx, commit, f)
}

var _ sdktest.RunSubject = configured{}
