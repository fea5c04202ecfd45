package abi

import (
	"context"
	"encoding/json"
)

// Capability names a host capability a plugin may ask for in PluginInfo.
type Capability string

// Capabilities of ABI v1.
const (
	// CapabilitySQL lets a plugin run parameterised SQL against an SQLite
	// database the host owns and scopes to it. See SPEC.md "Capability sql".
	CapabilitySQL Capability = "sql"
)

// CapabilityModule is the WebAssembly import module of the host capability
// functions. Pointers passed to and returned from them are Extism kernel
// memory offsets, like the kernel's own imports.
const CapabilityModule = "wasmhist:host/v1"

// ExtismKernel is the release of the Extism go-sdk whose kernel imports
// and semantics the host provides to plugins (the extism:host/env module),
// and which the tests run plugins under as the reference host.
const ExtismKernel = "v1.7.1"

// PluginInfo is what describe returns.
type PluginInfo struct {
	// Name identifies the plugin, e.g. "inmemory". Lower case, digits, '-' and '_'.
	Name string `json:"name"`
	// Version is the plugin's own version (semver recommended).
	Version string `json:"version"`
	// ABI is the "major.minor" ABI version the plugin was built against.
	ABI string `json:"abi"`
	// StateVersion is the version of the state layout; it increases when the
	// layout changes and migrate_state can upgrade older state.
	StateVersion int `json:"state_version"`
	// StateSchema is a JSON Schema (2020-12) every state must satisfy.
	StateSchema json.RawMessage `json:"state_schema"`
	// InitialState is the state of a session that has none for the plugin
	// yet. When absent the host uses the empty object {}.
	InitialState json.RawMessage `json:"initial_state,omitempty"`
	// ConfigSchema is a JSON Schema the operator's config must satisfy.
	// When absent the config must be an object.
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
	// Capabilities the plugin needs. Loading fails unless all are granted.
	Capabilities []Capability `json:"capabilities,omitempty"`
	// OmitState lists exports whose requests need no state: the host then
	// leaves Request.State out, which keeps large histories from crossing the
	// boundary. Only provide, store, clear and (from ABI 1.1) list may be
	// listed.
	OmitState []string `json:"omit_state,omitempty"`
}

// SessionFacts tells a plugin which session and state slot a call is for.
type SessionFacts struct {
	SessionID        string `json:"session_id"`
	StateKey         string `json:"state_key"`
	ServiceSessionID string `json:"service_session_id,omitempty"`
}

// ProvideRequest is provide's input.
type ProvideRequest struct {
	State   json.RawMessage `json:"state,omitempty"`
	Config  json.RawMessage `json:"config,omitempty"`
	Session SessionFacts    `json:"session"`
	// RequestMessages are the caller's messages for this run, for providers
	// whose choice of history depends on them.
	RequestMessages []json.RawMessage `json:"request_messages,omitempty"`
}

// ProvideResponse is provide's output: history to put before the request
// messages, either by value (Messages) or by reference into the plugin's own
// state (FromState), and optionally a state change.
type ProvideResponse struct {
	Messages  []json.RawMessage `json:"messages,omitempty"`
	FromState *StateSelection   `json:"from_state,omitempty"`
	StateChange
}

// StateSelection selects messages stored in the plugin's state: the array at
// Pointer (an RFC 6901 JSON Pointer into the state), reduced by Window. The
// host resolves it natively, so the history never crosses the boundary.
type StateSelection struct {
	Pointer string  `json:"pointer"`
	Window  *Window `json:"window,omitempty"`
}

// Window bounds a history. The host applies it natively with the same rules as
// its reducers: the newest messages are kept, a tool call is never separated
// from its results, and a leading system message is always kept.
type Window struct {
	// MaxMessages keeps at most this many messages (0: no bound). The system
	// message counts; a tool call group that does not fit is dropped whole.
	MaxMessages int `json:"max_messages,omitempty"`
	// MaxTokens keeps the newest messages whose estimated tokens fit (0: no bound).
	MaxTokens int `json:"max_tokens,omitempty"`
}

// StoreRequest is store's input: only the messages new in this call.
type StoreRequest struct {
	State            json.RawMessage   `json:"state,omitempty"`
	Config           json.RawMessage   `json:"config,omitempty"`
	Session          SessionFacts      `json:"session"`
	RequestMessages  []json.RawMessage `json:"request_messages"`
	ResponseMessages []json.RawMessage `json:"response_messages"`
}

// StoreResponse is store's output.
type StoreResponse struct {
	StateChange
}

// ListRequest is list's input: one page of what the plugin stored, oldest first.
type ListRequest struct {
	State   json.RawMessage `json:"state,omitempty"`
	Config  json.RawMessage `json:"config,omitempty"`
	Session SessionFacts    `json:"session"`
	// Cursor is empty for the first page, else a NextCursor from before.
	Cursor string `json:"cursor,omitempty"`
	// Limit is the page size the host wants; the plugin may return fewer.
	Limit int `json:"limit,omitempty"`
}

// ListResponse is list's output: one page either by value (Messages and
// NextCursor, an empty NextCursor meaning the last page) or, from ABI 1.1,
// by reference (FromState), which the host pages itself.
type ListResponse struct {
	Messages   []json.RawMessage `json:"messages"`
	NextCursor string            `json:"next_cursor,omitempty"`
	// FromState names the array in the plugin's state that holds everything
	// stored for the key, oldest first (ABI 1.1; SPEC section 4.4.1). The
	// host then serves the page the request's cursor and limit name from that
	// array, and issues the cursors itself, so a plugin that keeps its
	// history in the state lists it without receiving the state (list in
	// PluginInfo.OmitState). Window must be nil; Messages must be empty and
	// NextCursor absent.
	FromState *StateSelection `json:"from_state,omitempty"`
}

// ClearRequest is clear's input.
type ClearRequest struct {
	State   json.RawMessage `json:"state,omitempty"`
	Config  json.RawMessage `json:"config,omitempty"`
	Session SessionFacts    `json:"session"`
}

// ClearResponse is clear's output.
type ClearResponse struct {
	StateChange
}

// MigrateStateRequest asks a plugin to bring state written at FromVersion up
// to its current StateVersion.
type MigrateStateRequest struct {
	FromVersion int             `json:"from_version"`
	State       json.RawMessage `json:"state"`
	Config      json.RawMessage `json:"config,omitempty"`
}

// MigrateStateResponse carries the upgraded state.
type MigrateStateResponse struct {
	State json.RawMessage `json:"state"`
}

// StateChange is how an export changes its state: a whole new State, or a
// Patch applied to the current one, or neither (no change). Both at once is
// invalid output.
type StateChange struct {
	State json.RawMessage `json:"state,omitempty"`
	Patch []PatchOp       `json:"state_patch,omitempty"`
}

// PatchOp is one operation of the RFC 6902 JSON Patch subset ABI v1 uses:
// "add" (a path ending in "/-" appends to an array), "replace" and "remove".
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Patch operation names.
const (
	PatchAdd     = "add"
	PatchReplace = "replace"
	PatchRemove  = "remove"
)

// Handler runs one export in process: it takes the export's JSON request and
// returns its JSON response, or an error (an *Error keeps its code). Package
// sdk builds one from a provider so that plugin logic runs natively through
// the same host code paths as the WebAssembly build.
type Handler func(ctx context.Context, export string, input []byte) ([]byte, error)
