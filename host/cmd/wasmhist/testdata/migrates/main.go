//go:build wasip1

// Command migrates is the in-memory provider at state version 2, whose
// state keeps the messages under "history" where version 1 kept them under
// "messages": its migrate_state moves them. The command's tests give
// `conformance --older-state` a version 1 state to check it with.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

type provider struct{}

func (provider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name:         "migrates",
		Version:      "0.0.1",
		StateVersion: 2,
		StateSchema:  json.RawMessage(`{"type":"object","required":["history"],"properties":{"history":{"type":"array"}},"additionalProperties":false}`),
		InitialState: json.RawMessage(`{"history":[]}`),
	}
}

func (provider) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return &abi.ProvideResponse{FromState: &abi.StateSelection{Pointer: "/history"}}, nil
}

func (provider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	msgs := append(append([]json.RawMessage{}, req.RequestMessages...), req.ResponseMessages...)
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/history", msgs)}}, nil
}

func (provider) MigrateState(_ context.Context, req *abi.MigrateStateRequest) (*abi.MigrateStateResponse, error) {
	if req.FromVersion != 1 {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "no migration from state version %d", req.FromVersion)
	}
	var old struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(req.State, &old); err != nil {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "state version 1: %v", err)
	}
	if old.Messages == nil {
		old.Messages = []json.RawMessage{}
	}
	state, err := json.Marshal(map[string]any{"history": old.Messages})
	if err != nil {
		return nil, fmt.Errorf("encoding the state: %w", err)
	}
	return &abi.MigrateStateResponse{State: state}, nil
}

func init() { sdk.Register(provider{}) }

func main() {}
