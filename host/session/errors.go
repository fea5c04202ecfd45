package session

import "github.com/wasmhist/wasmhist/host/internal/hosterr"

// ErrInvalid reports a malformed session, or a state slot that belongs to
// another plugin. It is the same error as host.ErrInvalidSession, so a
// caller of either package tests for it with errors.Is.
var ErrInvalid = hosterr.ErrInvalidSession
