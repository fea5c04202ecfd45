package session

import (
	"errors"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
)

// ErrInvalid reports a malformed session, or a state slot that belongs to
// another plugin. It is the same error as host.ErrInvalidSession, so a
// caller of either package tests for it with errors.Is.
var ErrInvalid = hosterr.ErrInvalidSession

// Errors of session stores, for errors.Is.
var (
	// ErrStaleRevision reports a save of a session whose stored copy has
	// the same or a newer revision: someone else committed since this copy
	// was loaded, and writing it would lose their update.
	ErrStaleRevision = errors.New("session store: stale revision")
	// ErrStoreRepaired comes with ErrStaleRevision when a run's commit
	// found the session store behind a database's journal (a process
	// ended between the database's commit and the store's save, or the
	// session was restored from an older copy than its database) and
	// saved the journal's session into the store instead of the run:
	// nothing of the run was committed, and running it again on the
	// session as now stored is safe. No one else committed meanwhile.
	ErrStoreRepaired = errors.New("session store: brought up to date from a database's journal")
	// ErrNotFound reports a load of a session the store does not hold.
	ErrNotFound = errors.New("session store: session not found")
)
