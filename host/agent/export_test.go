package agent

import "github.com/wasmhist/wasmhist/host/internal/txn"

// SetCommitFault installs a fault injector at the steps of a's commits.
func SetCommitFault(a *Agent, f func(txn.Step) error) { a.fault = f }
