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
	// ErrNotFound reports a load of a session the store does not hold.
	ErrNotFound = errors.New("session store: session not found")
)
