// Package hosterr holds the sentinel errors the host's internal packages
// return and package host re-exports, so that one error value has one
// identity whether it is tested inside the host or by an embedder.
package hosterr

import "errors"

// Host-detected failures. Package host documents each under the same name.
var (
	ErrTimeout          = errors.New("host: plugin call timed out")
	ErrMemoryLimit      = errors.New("host: plugin exceeded its memory limit")
	ErrTrap             = errors.New("host: plugin trapped")
	ErrOutputTooLarge   = errors.New("host: plugin output too large")
	ErrInputTooLarge    = errors.New("host: plugin input too large")
	ErrInvalidOutput    = errors.New("host: invalid plugin output")
	ErrVersionMismatch  = errors.New("host: ABI version mismatch")
	ErrChecksumMismatch = errors.New("host: checksum mismatch")
	ErrCapabilityDenied = errors.New("host: capability denied")
	ErrMissingExport    = errors.New("host: missing export")
	ErrUnsupported      = errors.New("host: unsupported by plugin")
	ErrInvalidConfig    = errors.New("host: invalid config")
	ErrInvalidPlugin    = errors.New("host: invalid plugin")
	ErrInvalidSession   = errors.New("host: invalid session")
	ErrInvalidState     = errors.New("host: invalid state")
	ErrClosed           = errors.New("host: closed")
)
