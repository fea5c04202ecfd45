//go:build wasip1

// Command brokenplugin is a plugin with a bug a conformance run must catch:
// store keeps the request messages and drops the response, so the model's
// answers vanish from the history. Everything else is right, so the run
// shows which cases catch it and which pass.
package main

import (
	"context"
	"encoding/json"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

type provider struct{}

func (provider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name:         "broken",
		Version:      "0.0.1",
		StateVersion: 1,
		StateSchema:  json.RawMessage(`{"type":"object","required":["messages"],"properties":{"messages":{"type":"array"}}}`),
		InitialState: json.RawMessage(`{"messages":[]}`),
	}
}

func (provider) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return &abi.ProvideResponse{FromState: &abi.StateSelection{Pointer: "/messages"}}, nil
}

func (provider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	if len(req.RequestMessages) == 0 {
		return &abi.StoreResponse{}, nil
	}
	// The bug: req.ResponseMessages are not appended.
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", req.RequestMessages)}}, nil
}

func init() { sdk.Register(provider{}) }

func main() {}
