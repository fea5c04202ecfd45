package txn

// SetFault installs f as the fault injector of tx's next Commit.
func SetFault(tx *Txn, f func(Step) error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.fault = f
}
