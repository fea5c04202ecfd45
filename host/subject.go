package host

import (
	"context"
	"encoding/json"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
)

// The methods in this file drive a plugin at the level of one raw state,
// as package sdk/sdktest's conformance suite does. They apply state
// changes exactly as Provider does; a nil state means the initial state.
//
// As with a session slot, the host never writes into a state it was given
// or returned: a caller may keep any older state and pass it again.

// ProvideState runs provide and returns the selected history (state
// references resolved) and the state after the call.
func (p *Plugin) ProvideState(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, request []json.RawMessage) ([]json.RawMessage, json.RawMessage, error) {
	state, cl, err := p.rawState(ctx, state)
	if err != nil {
		return nil, nil, err
	}
	res, err := p.provide(ctx, facts, state, cl, request, true)
	if err != nil {
		return nil, nil, err
	}
	return res.raw, res.state, nil
}

// StoreState runs store and returns the state after the call.
func (p *Plugin) StoreState(ctx context.Context, facts abi.SessionFacts, state json.RawMessage, request, response []json.RawMessage) (json.RawMessage, error) {
	state, cl, err := p.rawState(ctx, state)
	if err != nil {
		return nil, err
	}
	next, _, err := p.store(ctx, facts, state, cl, request, response)
	if err != nil {
		return nil, err
	}
	return next, nil
}

// Call runs one export with a raw request and returns its raw response,
// under the same limits as every call.
func (p *Plugin) Call(ctx context.Context, export string, input []byte) ([]byte, error) {
	var out []byte
	err := p.invoke(ctx, export, input, func(_ context.Context, b []byte) error {
		out = b
		return nil
	})
	return out, err
}

// rawState is the state to call with and the Claim of its cached Doc
// (checkState); the caller's bytes are not written during the call.
func (p *Plugin) rawState(ctx context.Context, state json.RawMessage) (json.RawMessage, statepatch.Claim, error) {
	if isNull(state) {
		return p.initialState(), statepatch.Claim{}, nil
	}
	cl, err := p.checkState(ctx, state)
	if ctx.Err() != nil {
		return nil, statepatch.Claim{}, ctx.Err()
	}
	if err != nil {
		return nil, statepatch.Claim{}, &PluginError{Plugin: p.name, Export: "state", Err: wrapInvalidState(err)}
	}
	return state, cl, nil
}
