package agent

// SetCommitHook installs a fault injector at the steps of a commit, for
// tests; the returned function removes it.
func SetCommitHook(f func(CommitStep) error) (restore func()) {
	old := commitHook
	commitHook = f
	return func() { commitHook = old }
}
