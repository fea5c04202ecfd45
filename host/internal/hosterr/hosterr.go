// Package hosterr holds the sentinel errors the host's internal packages
// return and package host re-exports, so that one error value has one
// identity whether it is tested inside the host or by an embedder.
package hosterr

import "errors"

// Host-detected failures. Package host documents each under the same name.
// Their messages carry no package prefix: the error that reaches a caller
// is always wrapped once by the operation that failed ("host: load x.wasm:
// ...", "host: plugin p: store: ...", "session: decode: ..."), as an
// *os.PathError wraps a bare syscall error, so that no message repeats
// "host:" at every layer.
var (
	ErrTimeout          = errors.New("plugin call timed out")
	ErrMemoryLimit      = errors.New("plugin exceeded its memory limit")
	ErrTrap             = errors.New("plugin trapped")
	ErrOutputTooLarge   = errors.New("plugin output too large")
	ErrInputTooLarge    = errors.New("plugin input too large")
	ErrInvalidOutput    = errors.New("invalid plugin output")
	ErrVersionMismatch  = errors.New("ABI version mismatch")
	ErrChecksumMismatch = errors.New("checksum mismatch")
	ErrCapabilityDenied = errors.New("capability denied")
	ErrMissingExport    = errors.New("missing export")
	ErrUnsupported      = errors.New("unsupported by plugin")
	ErrInvalidConfig    = errors.New("invalid config")
	ErrInvalidPlugin    = errors.New("invalid plugin")
	ErrCompileLimit     = errors.New("plugin too costly to compile")
	ErrInvalidSession   = errors.New("invalid session")
	ErrInvalidState     = errors.New("invalid state")
	ErrStateVersion     = errors.New("state version not readable")
	ErrClosed           = errors.New("closed")
	// ErrKeyRotated: the PostgreSQL host key was rotated after the host
	// read it (package pggrant re-exports it).
	ErrKeyRotated = errors.New("the host key was rotated")
)
