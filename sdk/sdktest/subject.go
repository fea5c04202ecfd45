package sdktest

import (
	"context"
	"encoding/json"

	"github.com/wasmhist/wasmhist/abi"
)

// Subject is a loaded plugin as the conformance suite drives it. The host's
// *host.Plugin satisfies it for both WebAssembly and native plugins, so the
// same suite runs against a plugin's Go code and its .wasm build.
//
// State-level methods take and return a provider's raw state and apply the
// plugin's state changes (patches, whole states, from_state selections)
// exactly as the host does during an agent run.
type Subject interface {
	Info() abi.PluginInfo
	// InitialState is the state of a session the plugin has not seen yet.
	InitialState() json.RawMessage
	// ProvideState runs provide and returns the history it selects (state
	// references resolved) and the state after the call.
	ProvideState(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, request []json.RawMessage) (history []json.RawMessage, newState json.RawMessage, err error)
	// StoreState runs store and returns the state after the call.
	StoreState(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, request, response []json.RawMessage) (newState json.RawMessage, err error)
	// Call runs one export with a raw request, as the wire carries it.
	Call(ctx context.Context, export string, input []byte) ([]byte, error)
}

// Factory returns a new Subject each time it is called, backed by fresh
// plugin instances, so the suite can spread calls over instances.
type Factory func(ctx context.Context) (Subject, error)
