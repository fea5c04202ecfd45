package host

import (
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// Errors the host detects itself, distinct from what a plugin reports.
// Test with errors.Is. A plugin-reported error is an *abi.Error inside a
// *PluginError, so errors.Is(err, abi.ErrNotFound) and the other abi
// sentinels work on it.
var (
	// ErrTimeout: a call ran past its deadline and was stopped.
	ErrTimeout = hosterr.ErrTimeout
	// ErrMemoryLimit: a plugin memory was refused growth past
	// Limits.MemoryPages.
	ErrMemoryLimit = hosterr.ErrMemoryLimit
	// ErrTrap: the plugin trapped (a Go guest's panic, unreachable, a
	// fatal runtime error). The message carries the first line the guest
	// wrote to stderr, e.g. its panic value.
	ErrTrap = hosterr.ErrTrap
	// ErrOutputTooLarge: the output exceeded Limits.MaxOutputBytes; it was
	// discarded unread.
	ErrOutputTooLarge = hosterr.ErrOutputTooLarge
	// ErrInputTooLarge: the request exceeded Limits.MaxInputBytes; it was
	// not sent.
	ErrInputTooLarge = hosterr.ErrInputTooLarge
	// ErrInvalidOutput: the output was not valid JSON, did not match its
	// envelope, or produced a state that violates the state_schema.
	ErrInvalidOutput = hosterr.ErrInvalidOutput
	// ErrVersionMismatch: the plugin speaks another ABI version. The
	// message says whether to rebuild the plugin or upgrade the host.
	ErrVersionMismatch = hosterr.ErrVersionMismatch
	// ErrChecksumMismatch: the plugin's sha256 differs from the pin.
	ErrChecksumMismatch = hosterr.ErrChecksumMismatch
	// ErrCapabilityDenied: the plugin needs a capability that was not
	// granted (or that this host does not provide).
	ErrCapabilityDenied = hosterr.ErrCapabilityDenied
	// ErrMissingExport: the module lacks the marker or a required export.
	ErrMissingExport = hosterr.ErrMissingExport
	// ErrUnsupported: the plugin does not implement an optional export.
	ErrUnsupported = hosterr.ErrUnsupported
	// ErrInvalidConfig: a Config, Limits or plugin configuration is invalid.
	ErrInvalidConfig = hosterr.ErrInvalidConfig
	// ErrInvalidPlugin: the module or its describe answer is unusable for a
	// reason other than those above (malformed binary, bad name, a schema
	// that does not compile, imports the host does not provide).
	ErrInvalidPlugin = hosterr.ErrInvalidPlugin
	// ErrCompileLimit: compiling the module would cost more than the host
	// allows. Either a function exceeds a bound on its shape (the message
	// names the construct: br_table targets, nesting, locals), or the
	// compilation, run in a process of its own, passed 10 s of CPU or
	// 512 MiB (abi/SPEC.md section 9). From Load it comes with
	// ErrInvalidPlugin; from Plugin.Compiled, after a plugin's first load,
	// it means the plugin stays on the interpreter, and later loads fail.
	ErrCompileLimit = hosterr.ErrCompileLimit
	// ErrInvalidSession: a session is malformed or a state slot belongs to
	// another plugin.
	ErrInvalidSession = hosterr.ErrInvalidSession
	// ErrInvalidState: a state in a session violates the plugin's
	// state_schema, or was written by a state version the plugin cannot read.
	ErrInvalidState = hosterr.ErrInvalidState
	// ErrStateVersion: a state in a session was written by a state version
	// the plugin cannot read: a newer one, or an older one while the
	// plugin has no migrate_state. It comes with ErrInvalidState.
	ErrStateVersion = hosterr.ErrStateVersion
	// ErrClosed: the Host or Plugin was closed.
	ErrClosed = hosterr.ErrClosed
	// ErrBusy: a database the plugin was granted stayed locked by another
	// writer (usually another process) past the host's wait, so the call
	// failed through no fault of the plugin's. It is txn.ErrBusy; retry,
	// or keep data many processes write at once in PostgreSQL.
	ErrBusy = txn.ErrBusy
)

// PluginError is the error of a failed plugin call: which plugin, which
// export, and why (a host sentinel above, an *abi.Error the plugin reported,
// or a context error).
type PluginError struct {
	Plugin string
	Export string
	Err    error
}

func (e *PluginError) Error() string {
	return fmt.Sprintf("host: plugin %s: %s: %v", e.Plugin, e.Export, e.Err)
}

func (e *PluginError) Unwrap() error { return e.Err }
