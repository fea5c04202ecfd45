// Command guest is a plugin that exercises the sdk's guest side: it echoes
// what it is given, fails on request, and calls a test capability, so a test
// can check every path through kernel memory from the host side.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

type guest struct{}

func (guest) Describe() abi.PluginInfo {
	return abi.PluginInfo{Name: "guest", Version: "0.0.1", StateVersion: 1, StateSchema: json.RawMessage(`{"type":"object"}`)}
}

// Provide echoes the request messages, or acts on the first message's
// "do" field: "panic", "fail", "plain", "capability" (call test_echo with
// the message and return the result as the only message) or "sql" (the same
// through the built-in sql function).
func (guest) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	if len(req.RequestMessages) > 0 {
		var cmd struct {
			Do string `json:"do"`
		}
		_ = json.Unmarshal(req.RequestMessages[0], &cmd)
		switch cmd.Do {
		case "panic":
			panic("asked to")
		case "fail":
			return nil, abi.Errorf(abi.CodeNotFound, "asked to fail")
		case "plain":
			return nil, errors.New("a plain error")
		case "capability":
			res, err := sdk.CallCapability("test_echo", req.RequestMessages[0])
			if err != nil {
				return nil, err
			}
			return &abi.ProvideResponse{Messages: []json.RawMessage{res}}, nil
		case "sql":
			res, err := sdk.CallCapability(abi.SQLFunction, req.RequestMessages[0])
			if err != nil {
				return nil, err
			}
			return &abi.ProvideResponse{Messages: []json.RawMessage{res}}, nil
		}
	}
	return &abi.ProvideResponse{Messages: req.RequestMessages}, nil
}

func (guest) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: sdk.AppendOps("/messages", req.RequestMessages)}}, nil
}

func init() {
	sdk.Register(guest{})
	sdk.RegisterCapabilityFunc("test_echo", testEcho)
}

func main() {}
