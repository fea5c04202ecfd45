package sdktest

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// The broken providers of the import and split-pair cases.

// inputOnly keeps, of request_messages, only what a caller types (system
// and user messages), taking the rest for history the host failed to
// remove: an imported history loses its answers and tool calls.
type inputOnly struct{ appendProvider }

func (inputOnly) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	var msgs []json.RawMessage
	for _, raw := range req.RequestMessages {
		var m abi.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if m.Role == abi.RoleSystem || m.Role == abi.RoleUser {
			msgs = append(msgs, raw)
		}
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", msgs, req.ResponseMessages)}}, nil
}

// inputRefuser refuses assistant and tool messages among request_messages
// as malformed.
type inputRefuser struct{ appendProvider }

func (p inputRefuser) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	for i, raw := range req.RequestMessages {
		var m abi.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if m.Role == abi.RoleAssistant || m.Role == abi.RoleTool {
			return nil, abi.Errorf(abi.CodeInvalidArgument, "request message %d is a %s message: request messages are input", i, m.Role)
		}
	}
	return p.appendProvider.Store(ctx, req)
}

// openCalls says, of msgs, which calls have no result among them and which
// results no call.
func openCalls(msgs []json.RawMessage) (calls, results map[string]bool, err error) {
	calls, results = map[string]bool{}, map[string]bool{}
	for _, raw := range msgs {
		var m abi.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, err
		}
		for _, id := range m.CallIDs() {
			calls[id] = true
		}
		for _, id := range m.ResultIDs() {
			if calls[id] {
				delete(calls, id)
			} else {
				results[id] = true
			}
		}
	}
	return calls, results, nil
}

// orphanStripper drops, from what one store carries, tool calls without
// their result and results without their call, as a service that
// enforces pairing wants them: per store, not per history.
type orphanStripper struct{ appendProvider }

func (orphanStripper) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	msgs := slices.Concat(req.RequestMessages, req.ResponseMessages)
	calls, results, err := openCalls(msgs)
	if err != nil {
		return nil, err
	}
	var kept []json.RawMessage
	for _, raw := range msgs {
		var m abi.Message
		_ = json.Unmarshal(raw, &m)
		orphan := slices.ContainsFunc(m.CallIDs(), func(id string) bool { return calls[id] }) ||
			slices.ContainsFunc(m.ResultIDs(), func(id string) bool { return results[id] })
		if !orphan {
			kept = append(kept, raw)
		}
	}
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", kept)}}, nil
}

// pairChecker refuses a store whose tool calls and results do not pair up
// within it.
type pairChecker struct{ appendProvider }

func (p pairChecker) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	calls, results, err := openCalls(slices.Concat(req.RequestMessages, req.ResponseMessages))
	if err != nil {
		return nil, err
	}
	if len(calls)+len(results) > 0 {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "%d tool calls without a result, %d results without a call", len(calls), len(results))
	}
	return p.appendProvider.Store(ctx, req)
}
