//go:build wasip1

// Command sqlhostile is a plugin that runs whatever SQL its caller sends, to
// test that the host's sql capability contains it. Provide's first request
// message is a text message whose text is a command:
//
//	{"sql": ["statement", ...], "swallow": false}
//
// Each statement runs as a query; the first failure is returned, unless
// swallow is set, in which case failures are ignored and provide succeeds
// (a plugin trying to commit despite a refused statement). provide returns
// one message per statement that returned rows, holding the rows as text.
package main

import (
	"context"
	"encoding/json"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sql"
)

type hostile struct{}

func (hostile) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name: "sqlhostile", Version: "0.0.1", ABI: abi.Version, StateVersion: 1,
		StateSchema:  json.RawMessage(`{"type":"object"}`),
		Capabilities: []abi.Capability{abi.CapabilitySQL},
	}
}

type command struct {
	SQL     []string `json:"sql"`
	Swallow bool     `json:"swallow"`
}

func (hostile) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	if len(req.RequestMessages) == 0 {
		return &abi.ProvideResponse{}, nil
	}
	var m abi.Message
	if err := json.Unmarshal(req.RequestMessages[0], &m); err != nil {
		return nil, err
	}
	var cmd command
	if err := json.Unmarshal([]byte(m.TextContent()), &cmd); err != nil {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "command: %v", err)
	}
	resp := &abi.ProvideResponse{}
	for _, q := range cmd.SQL {
		rows, err := sql.Query(q)
		if err != nil {
			if cmd.Swallow {
				continue
			}
			return nil, err
		}
		if len(rows.Columns) == 0 {
			continue
		}
		var text []string
		for i := range rows.Len() {
			row, _ := json.Marshal(rows.Row(i))
			text = append(text, string(row))
		}
		b, _ := json.Marshal(abi.NewMessage(abi.RoleAssistant, text...))
		resp.Messages = append(resp.Messages, b)
	}
	return resp, nil
}

func (hostile) Store(context.Context, *abi.StoreRequest) (*abi.StoreResponse, error) {
	return &abi.StoreResponse{}, nil
}

func init() { sdk.Register(hostile{}) }

func main() {}
