// Command recent is a wasmhist history plugin: it keeps a session's
// messages in the session state and gives the model the most recent ones.
package main

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// config is what the operator may set: how many messages the model sees.
type config struct {
	MaxMessages int `json:"max_messages,omitempty"`
}

// state is the plugin's whole memory of a session.
type state struct {
	Messages []json.RawMessage `json:"messages"`
}

type provider struct{}

var (
	_ sdk.Provider = provider{}
	_ sdk.Lister   = provider{} // optional: lets `wasmhist history` read it
)

func (provider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name:         "recent",
		Version:      "0.1.0",
		StateVersion: 1,
		StateSchema:  json.RawMessage(`{"type":"object","required":["messages"],"properties":{"messages":{"type":"array","items":{"type":"object"}}}}`),
		InitialState: json.RawMessage(`{"messages":[]}`),
		ConfigSchema: json.RawMessage(`{"type":"object","properties":{"max_messages":{"type":"integer","minimum":1}},"additionalProperties":false}`),
		// provide and store work without seeing the state: keep it on the host.
		OmitState: []string{abi.ExportProvide, abi.ExportStore},
	}
}

// Provide selects the newest messages by reference; the host cuts the
// window without splitting a tool call from its result.
func (provider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	cfg, err := sdk.DecodeConfig[config](req.Config)
	if err != nil {
		return nil, err
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = 100
	}
	sel := &abi.StateSelection{Pointer: "/messages", Window: &abi.Window{MaxMessages: cfg.MaxMessages}}
	return &abi.ProvideResponse{FromState: sel}, nil
}

// Store appends the new messages, request first, without decoding them.
func (provider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	ops := sdk.AppendOps("/messages", req.RequestMessages, req.ResponseMessages)
	return &abi.StoreResponse{StateChange: abi.StateChange{Patch: ops}}, nil
}

// List pages through everything stored; the cursor is the next index.
// A cursor at or past the end (after a clear, say) is an empty last page.
func (provider) List(_ context.Context, req *abi.ListRequest) (*abi.ListResponse, error) {
	st, err := sdk.DecodeState[state](req.State)
	if err != nil {
		return nil, err
	}
	start := 0
	if req.Cursor != "" {
		if start, err = strconv.Atoi(req.Cursor); err != nil || start < 0 {
			return nil, abi.Errorf(abi.CodeInvalidArgument, "list: bad cursor %q", req.Cursor)
		}
		start = min(start, len(st.Messages))
	}
	end := len(st.Messages)
	if req.Limit > 0 {
		end = min(end, start+req.Limit)
	}
	resp := &abi.ListResponse{Messages: st.Messages[start:end]}
	if end < len(st.Messages) {
		resp.NextCursor = strconv.Itoa(end)
	}
	return resp, nil
}

func init() { sdk.Register(provider{}) }

func main() {}
