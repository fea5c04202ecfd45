//go:build wasip1

// Command fat is a plugin that links fmt and encoding/json from several
// places: CheckLean's test expects one failure naming them.
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
		Name:         "fat",
		Version:      fmt.Sprintf("%d.%d.%d", 0, 0, 1),
		StateVersion: 1,
		StateSchema:  json.RawMessage(`{"type":"object"}`),
	}
}

func (provider) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return nil, fmt.Errorf("provide: %w", abi.ErrNotFound)
}

func (provider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	var state map[string]any
	if err := json.Unmarshal(req.State, &state); err != nil {
		return nil, err
	}
	b, err := json.Marshal(state)
	return &abi.StoreResponse{StateChange: abi.StateChange{State: b}}, err
}

func init() { sdk.Register(provider{}) }

func main() {}
