//go:build wasip1

// Command hangplugin keeps its history in its state, as inmemory does,
// and its list and clear exports never answer: each says on standard
// error that it started (the host passes that on when EXTISM_ENABLE_WASI_OUTPUT is set)
// and then spins until the host stops the call. A test interrupts a
// command there, knowing where it is.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

type provider struct{}

func (provider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name:         "hang",
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
	msgs := append(append([]json.RawMessage{}, req.RequestMessages...), req.ResponseMessages...)
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", msgs)}}, nil
}

// spins is read by the loop, so that the compiler keeps it.
var spins uint64

// hang says it started, then spins.
func hang() {
	fmt.Fprintln(os.Stderr, "hangplugin: waiting")
	for spins >= 0 {
		spins++
	}
}

func (provider) List(context.Context, *abi.ListRequest) (*abi.ListResponse, error) {
	hang()
	return &abi.ListResponse{}, nil
}

func (provider) Clear(context.Context, *abi.ClearRequest) (*abi.ClearResponse, error) {
	hang()
	return &abi.ClearResponse{}, nil
}

func init() { sdk.Register(provider{}) }

func main() {}
