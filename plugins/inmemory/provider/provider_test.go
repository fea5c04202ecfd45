package provider

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

func msg(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"role":"user","contents":[{"type":"text","text":"m%d"}]}`, n))
}

func msgs(from, to int) []json.RawMessage {
	var out []json.RawMessage
	for i := from; i < to; i++ {
		out = append(out, msg(i))
	}
	return out
}

func TestDescribe(t *testing.T) {
	info := Provider{}.Describe()
	require.Equal(t, Name, info.Name)
	require.Equal(t, abi.Version, info.ABI)
	require.Equal(t, StateVersion, info.StateVersion)
	for name, doc := range map[string]json.RawMessage{"state_schema": info.StateSchema, "config_schema": info.ConfigSchema, "initial_state": info.InitialState} {
		assert.True(t, json.Valid(doc), "%s is not valid JSON: %s", name, doc)
	}
	// No export receives the history: that is what keeps the per-call
	// cost flat as the history grows. list answers by reference, ABI 1.1.
	for _, export := range []string{abi.ExportProvide, abi.ExportStore, abi.ExportClear, abi.ExportList} {
		assert.Contains(t, info.OmitState, export)
	}
	major, minor, ok := strings.Cut(info.ABI, ".")
	n, err := strconv.Atoi(minor)
	require.True(t, ok && err == nil, "ABI %q", info.ABI)
	assert.True(t, major == "1" && n >= 1, "list in omit_state needs ABI 1.1 or later, the plugin says %s", info.ABI)
}

func TestProvideWindow(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    *abi.Window
		wantErr error
	}{
		{name: "no config", config: ``, want: nil},
		{name: "empty config", config: `{}`, want: nil},
		{name: "zero bounds mean none", config: `{"max_messages":0,"max_tokens":0}`, want: nil},
		{name: "max messages", config: `{"max_messages":10}`, want: &abi.Window{MaxMessages: 10}},
		{name: "max tokens", config: `{"max_tokens":2000}`, want: &abi.Window{MaxTokens: 2000}},
		{name: "both", config: `{"max_messages":4,"max_tokens":300}`, want: &abi.Window{MaxMessages: 4, MaxTokens: 300}},
		{name: "negative", config: `{"max_messages":-1}`, wantErr: abi.ErrInvalidArgument},
		{name: "wrong type", config: `{"max_tokens":"many"}`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Provider{}.Provide(t.Context(), &abi.ProvideRequest{Config: json.RawMessage(tt.config), RequestMessages: msgs(0, 2)})
			require.ErrorIs(t, err, tt.wantErr)
			if err != nil {
				return
			}
			require.Empty(t, resp.Messages, "provide answered by value")
			require.Nil(t, resp.State, "provide changed the state")
			require.Nil(t, resp.Patch, "provide changed the state")
			assert.Equal(t, &abi.StateSelection{Pointer: "/messages", Window: tt.want}, resp.FromState)
		})
	}
}

func TestStore(t *testing.T) {
	tests := []struct {
		name              string
		request, response []json.RawMessage
		want              []json.RawMessage // appended values, in order
	}{
		{name: "request then response", request: msgs(0, 2), response: msgs(2, 4), want: msgs(0, 4)},
		{name: "response only", response: msgs(5, 6), want: msgs(5, 6)},
		{name: "request only", request: msgs(7, 9), want: msgs(7, 9)},
		{name: "nothing", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Provider{}.Store(t.Context(), &abi.StoreRequest{RequestMessages: tt.request, ResponseMessages: tt.response})
			require.NoError(t, err)
			require.Nil(t, resp.State, "store answered a whole state; it must append with a patch")
			var got []json.RawMessage
			for _, op := range resp.Patch {
				require.Equal(t, abi.PatchAdd, op.Op, "patch op %+v", op)
				require.Equal(t, "/messages/-", op.Path, "patch op %+v", op)
				got = append(got, op.Value)
			}
			assert.Equal(t, tt.want, got, "appended")
		})
	}
}

func TestStoreKeepsMessagesVerbatim(t *testing.T) {
	// Messages are opaque to the plugin: unknown fields and formatting pass
	// through untouched.
	in := `{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user", "x_later": {"k": [1, 2]}}],"response_messages":[]}`
	out, err := sdk.Handler(Provider{})(t.Context(), abi.ExportStore, []byte(in))
	require.NoError(t, err)
	want := `{"state_patch":[{"op":"add","path":"/messages/-","value":{"role":"user", "x_later": {"k": [1, 2]}}}]}`
	assert.Equal(t, want, string(out), "store output")
}

func TestList(t *testing.T) {
	state, err := json.Marshal(State{Messages: msgs(0, 5)})
	require.NoError(t, err)
	tests := []struct {
		name     string
		state    string
		cursor   string
		limit    int
		want     []json.RawMessage
		wantNext string
		wantErr  error
	}{
		{name: "first page", state: string(state), limit: 2, want: msgs(0, 2), wantNext: "2"},
		{name: "middle page", state: string(state), cursor: "2", limit: 2, want: msgs(2, 4), wantNext: "4"},
		{name: "last page", state: string(state), cursor: "4", limit: 2, want: msgs(4, 5)},
		{name: "default limit returns all", state: string(state), want: msgs(0, 5)},
		{name: "cursor at the end", state: string(state), cursor: "5", want: []json.RawMessage{}},
		{name: "empty history", state: `{"messages":[]}`, want: []json.RawMessage{}},
		{name: "cursor past the end", state: string(state), cursor: "6", want: []json.RawMessage{}},
		{name: "cursor far past the end", state: string(state), cursor: "99999", limit: 2, want: []json.RawMessage{}},
		{name: "any cursor after clear", state: `{"messages":[]}`, cursor: "4", want: []json.RawMessage{}},
		{name: "negative cursor", state: string(state), cursor: "-1", wantErr: abi.ErrInvalidArgument},
		{name: "cursor not a number", state: string(state), cursor: "abc", wantErr: abi.ErrInvalidArgument},
		{name: "state of the wrong shape", state: `{"messages":{}}`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Provider{}.List(t.Context(), &abi.ListRequest{State: json.RawMessage(tt.state), Cursor: tt.cursor, Limit: tt.limit})
			require.ErrorIs(t, err, tt.wantErr)
			if err != nil {
				return
			}
			if len(tt.want) == 0 {
				assert.Empty(t, resp.Messages, "page")
			} else {
				assert.Equal(t, tt.want, resp.Messages, "page")
			}
			assert.Equal(t, tt.wantNext, resp.NextCursor, "next cursor")
		})
	}
}

// TestListByReference: without a state (list is in omit_state) every page
// is the stored array by reference, which the host pages; the wire answer
// is that and nothing else.
func TestListByReference(t *testing.T) {
	for _, cursor := range []string{"", "200", "whatever"} {
		resp, err := Provider{}.List(t.Context(), &abi.ListRequest{Cursor: cursor, Limit: 100})
		require.NoError(t, err)
		require.NotNil(t, resp.FromState, "cursor %q", cursor)
		assert.Equal(t, "/messages", resp.FromState.Pointer)
		assert.Nil(t, resp.FromState.Window)
		assert.Empty(t, resp.Messages)
		assert.Empty(t, resp.NextCursor)
	}
	in := `{"session":{"session_id":"s","state_key":"history"},"cursor":"300","limit":100}`
	out, err := sdk.Handler(Provider{})(t.Context(), abi.ExportList, []byte(in))
	require.NoError(t, err)
	assert.JSONEq(t, `{"messages":[],"from_state":{"pointer":"/messages"}}`, string(out))
}

func TestListPagesThroughEverything(t *testing.T) {
	state, err := json.Marshal(State{Messages: msgs(0, 7)})
	require.NoError(t, err)
	var all []json.RawMessage
	cursor := ""
	for pages := 0; ; pages++ {
		require.LessOrEqual(t, pages, 7, "list never reached the last page")
		resp, err := Provider{}.List(t.Context(), &abi.ListRequest{State: state, Cursor: cursor, Limit: 3})
		require.NoError(t, err)
		all = append(all, resp.Messages...)
		if cursor = resp.NextCursor; cursor == "" {
			break
		}
	}
	assert.Equal(t, msgs(0, 7), all, "pages joined")
}

func TestClear(t *testing.T) {
	resp, err := Provider{}.Clear(t.Context(), &abi.ClearRequest{State: json.RawMessage(`{"messages":[{"role":"user"}]}`)})
	require.NoError(t, err)
	assert.Equal(t, `{"messages":[]}`, string(resp.State), "clear must answer the empty history")
	assert.Nil(t, resp.Patch)
}

// provided and stored keep TestAnswersAllocateOnce's answers on the heap,
// as the SDK's dispatch does, whatever the compiler inlines.
var (
	provided *abi.ProvideResponse
	stored   *abi.StoreResponse
)

// TestAnswersAllocateOnce: provide's and store's answers are one
// allocation each (each costs a WebAssembly guest a few thousand
// instructions), with a window or without, for a turn's two messages.
func TestAnswersAllocateOnce(t *testing.T) {
	ctx := t.Context()
	provide := &abi.ProvideRequest{RequestMessages: msgs(0, 1)}
	windowed := &abi.ProvideRequest{Config: json.RawMessage(`{"max_messages":4,"max_tokens":300}`)}
	store := &abi.StoreRequest{RequestMessages: msgs(0, 1), ResponseMessages: msgs(1, 2)}
	tests := []struct {
		name string
		call func()
	}{
		{name: "provide", call: func() { provided, _ = Provider{}.Provide(ctx, provide) }},
		{name: "provide with a window", call: func() { provided, _ = Provider{}.Provide(ctx, windowed) }},
		{name: "store", call: func() { stored, _ = Provider{}.Store(ctx, store) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, 1.0, testing.AllocsPerRun(100, tt.call))
		})
	}
}
