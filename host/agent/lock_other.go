//go:build !unix

package agent

// lockDir is a no-op where advisory locks are not available: a
// SessionFile then serializes the writers of one process only.
func lockDir(string) (func(), error) { return func() {}, nil }
