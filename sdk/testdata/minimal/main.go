// Command minimal is the smallest complete plugin, the one README.md shows:
// it keeps history in its state and appends new messages with a patch.
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
		Name:         "minimal",
		Version:      "0.1.0",
		StateVersion: 1,
		StateSchema:  json.RawMessage(`{"type":"object","required":["messages"],"properties":{"messages":{"type":"array"}}}`),
		InitialState: json.RawMessage(`{"messages":[]}`),
		OmitState:    []string{abi.ExportProvide, abi.ExportStore},
	}
}

// Provide returns the stored history by reference: the host reads it from
// the state itself, so it never crosses into the plugin.
func (provider) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return &abi.ProvideResponse{FromState: &abi.StateSelection{Pointer: "/messages"}}, nil
}

// Store appends the new messages, request first, without decoding them.
func (provider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	ops := sdk.AppendOps("/messages", req.RequestMessages, req.ResponseMessages)
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: ops}}, nil
}

func init() { sdk.Register(provider{}) }

func main() {}
