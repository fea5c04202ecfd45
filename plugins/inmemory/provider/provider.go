// Package provider is the logic of the inmemory plugin: a history provider
// that keeps every message in the session state, {"messages": [...]}.
//
// It never decodes a message. store answers a patch that appends the new
// messages, provide a reference to the stored array with the configured
// window, and list a reference to the same array, which the host pages
// (ABI 1.1), so the host does the JSON work natively and no call ships the
// history across the WebAssembly boundary (all four are listed in
// PluginInfo.OmitState, as is clear). list still pages a state it is given
// itself, as it did under ABI 1.0.
package provider

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// Name is the plugin's name in PluginInfo and in session state slots.
const Name = "inmemory"

// Version is the plugin's own version.
const Version = "0.1.0"

// StateVersion is the version of the state layout {"messages": [...]}.
const StateVersion = 1

// DefaultPageSize is how many messages list returns when the host names no
// limit.
const DefaultPageSize = 100

// messagesPointer is where the history lives in the state.
const messagesPointer = "/messages"

// Config is the operator's configuration of the plugin. Both bounds are
// optional; zero means unbounded. The host applies them when it resolves
// provide's selection: newest messages first, a tool call never separated
// from its results, the leading system message always kept.
type Config struct {
	// MaxMessages bounds how many messages provide returns.
	MaxMessages int `json:"max_messages,omitempty"`
	// MaxTokens bounds the estimated tokens of what provide returns.
	MaxTokens int `json:"max_tokens,omitempty"`
}

// State is the plugin's session state.
type State struct {
	Messages []json.RawMessage `json:"messages"`
}

var (
	stateSchema = json.RawMessage(`{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"title": "inmemory plugin state",
	"type": "object",
	"required": ["messages"],
	"properties": {
		"messages": {"type": "array", "items": {"type": "object"}}
	},
	"additionalProperties": false
}`)
	configSchema = json.RawMessage(`{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"title": "inmemory plugin config",
	"type": "object",
	"properties": {
		"max_messages": {"type": "integer", "minimum": 0},
		"max_tokens": {"type": "integer", "minimum": 0}
	},
	"additionalProperties": false
}`)
	initialState = json.RawMessage(`{"messages":[]}`)
)

// Provider is the inmemory history provider. Its zero value is ready to use
// and it holds nothing, so one value serves any number of sessions.
type Provider struct{}

var (
	_ sdk.Provider  = Provider{}
	_ sdk.Lister    = Provider{}
	_ sdk.Clearer   = Provider{}
	_ sdk.Transient = Provider{}
)

// Transient implements sdk.Transient: the provider keeps nothing of a
// request past its call (its answers refer to the request's messages, and
// are encoded before the call returns), so a WebAssembly guest reuses a
// request's memory for the next one.
func (Provider) Transient() {}

// Describe implements sdk.Provider.
func (Provider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name:         Name,
		Version:      Version,
		ABI:          abi.Version,
		StateVersion: StateVersion,
		StateSchema:  stateSchema,
		InitialState: initialState,
		ConfigSchema: configSchema,
		OmitState:    []string{abi.ExportProvide, abi.ExportStore, abi.ExportClear, abi.ExportList},
	}
}

// Provide implements sdk.Provider: the whole stored history, reduced by the
// configured window, selected by reference.
func (Provider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	cfg, err := decodeConfig(req.Config)
	if err != nil {
		return nil, err
	}
	a := new(provideAnswer)
	a.sel.Pointer = messagesPointer
	if cfg.MaxMessages > 0 || cfg.MaxTokens > 0 {
		a.win = abi.Window{MaxMessages: cfg.MaxMessages, MaxTokens: cfg.MaxTokens}
		a.sel.Window = &a.win
	}
	a.resp.FromState = &a.sel
	return &a.resp, nil
}

// provideAnswer is provide's response with its selection and window, in
// one allocation rather than three: each costs a WebAssembly guest a few
// thousand instructions, and a provide is little else.
type provideAnswer struct {
	resp abi.ProvideResponse
	sel  abi.StateSelection
	win  abi.Window
}

// Store implements sdk.Provider: the request messages, then the response
// messages, appended to the history.
func (Provider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	return sdk.AppendStore(messagesPointer, req.RequestMessages, req.ResponseMessages), nil
}

// List implements sdk.Lister. A request without a state (list is in
// OmitState) is answered by reference: the host serves the page the cursor
// and limit name from the stored array, so a page costs the plugin nothing
// whatever the size of the history (SPEC section 4.4.1).
//
// A request with a state is paged here, as ABI 1.0 did: a host that sends
// the state has not left it out, and may not know the reference. The
// cursor is then the index of the page's first message, the form the
// host's cursors have too: history only grows at its end, so an index
// stays valid between pages until the history is cleared. A cursor at or
// past the end (one issued before a clear, say) gets an empty last page
// (SPEC section 4.4).
func (Provider) List(_ context.Context, req *abi.ListRequest) (*abi.ListResponse, error) {
	if len(req.State) == 0 {
		return &abi.ListResponse{FromState: &abi.StateSelection{Pointer: messagesPointer}}, nil
	}
	msgs, err := stateMessages(req.State)
	if err != nil {
		return nil, err
	}
	st := State{Messages: msgs}
	start := 0
	if req.Cursor != "" {
		start, err = strconv.Atoi(req.Cursor)
		if err != nil || start < 0 {
			return nil, &abi.Error{Code: abi.CodeInvalidArgument, Message: "list: cursor " + strconv.Quote(req.Cursor) +
				" is not one this plugin issued: it is a message index, a non-negative integer"}
		}
		start = min(start, len(st.Messages))
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	end := min(start+limit, len(st.Messages))
	resp := &abi.ListResponse{Messages: st.Messages[start:end]}
	if end < len(st.Messages) {
		resp.NextCursor = strconv.Itoa(end)
	}
	return resp, nil
}

// Clear implements sdk.Clearer: an empty history.
func (Provider) Clear(context.Context, *abi.ClearRequest) (*abi.ClearResponse, error) {
	return &abi.ClearResponse{StateChange: abi.StateChange{State: initialState}}, nil
}

func decodeConfig(raw json.RawMessage) (Config, error) {
	cfg, err := parseConfig(raw)
	if err != nil {
		return cfg, err
	}
	// The host validated the config against configSchema at load; this
	// guards the native path and hosts that do not validate.
	if cfg.MaxMessages < 0 || cfg.MaxTokens < 0 {
		return cfg, &abi.Error{Code: abi.CodeInvalidArgument, Message: "inmemory: config: " + abi.ErrInvalidArgument.Error() +
			": max_messages and max_tokens must not be negative"}
	}
	return cfg, nil
}
