package sdk

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

type testState struct {
	Messages []json.RawMessage `json:"messages"`
	Count    int               `json:"count"`
}

func TestDecodeState(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    testState
		wantErr error
	}{
		{name: "absent", in: ``, wantErr: ErrStateOmitted},
		{name: "null", in: `null`, wantErr: ErrStateOmitted},
		{name: "messages stay raw", in: `{"messages":[{"role":"user"}, {"b":2}],"count":2}`, want: testState{Messages: []json.RawMessage{json.RawMessage(`{"role":"user"}`), json.RawMessage(`{"b":2}`)}, Count: 2}},
		{name: "unknown fields ignored", in: `{"count":1,"later":true}`, want: testState{Count: 1}},
		{name: "wrong type", in: `{"count":"one"}`, wantErr: abi.ErrInvalidArgument},
		{name: "bad JSON", in: `{"count":`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeState[testState](json.RawMessage(tt.in))
			require.ErrorIs(t, err, tt.wantErr)
			if err == nil {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestDecodeConfig(t *testing.T) {
	type config struct {
		MaxMessages int `json:"max_messages"`
	}
	tests := []struct {
		name    string
		in      string
		want    config
		wantErr error
	}{
		{name: "absent", in: ``},
		{name: "set", in: `{"max_messages":5}`, want: config{MaxMessages: 5}},
		{name: "wrong type", in: `{"max_messages":"5"}`, wantErr: abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeConfig[config](json.RawMessage(tt.in))
			require.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestAppendOps(t *testing.T) {
	msgs := []json.RawMessage{json.RawMessage(`{"n":1}`), json.RawMessage(`{"n":2}`)}
	got, err := json.Marshal(AppendOps("/messages", msgs))
	require.NoError(t, err)
	want := `[{"op":"add","path":"/messages/-","value":{"n":1}},{"op":"add","path":"/messages/-","value":{"n":2}}]`
	assert.Equal(t, want, string(got))
	assert.Nil(t, AppendOps("/messages", nil), "AppendOps(nil) must have no operations")
	assert.Nil(t, AppendOps("/messages"), "AppendOps without lists must have no operations")

	// Several lists: their messages in order, one list after the other.
	third := []json.RawMessage{json.RawMessage(`{"n":3}`)}
	got, err = json.Marshal(AppendOps("/h", msgs[:1], nil, msgs[1:], third))
	require.NoError(t, err)
	want = `[{"op":"add","path":"/h/-","value":{"n":1}},{"op":"add","path":"/h/-","value":{"n":2}},{"op":"add","path":"/h/-","value":{"n":3}}]`
	assert.Equal(t, want, string(got))
}

// TestDecodeStateOmittedNamesOmitState: the error reaches the host as the
// plugin's message, so it must tell the author what to change.
func TestDecodeStateOmittedNamesOmitState(t *testing.T) {
	_, err := DecodeState[testState](nil)
	require.ErrorIs(t, err, ErrStateOmitted)
	assert.Contains(t, err.Error(), "omit_state")
	assert.Contains(t, abi.AsError(err).Message, "omit_state", "the wire message")
}

// appendStored keeps TestAppendStore's answers on the heap, as a provider
// returning them does, whatever the compiler inlines.
var appendStored *abi.StoreResponse

// TestAppendStore: the response carries AppendOps' patch, and a turn's two
// messages take one allocation for the response and its patch.
func TestAppendStore(t *testing.T) {
	msgs := []json.RawMessage{json.RawMessage(`{"n":1}`), json.RawMessage(`{"n":2}`), json.RawMessage(`{"n":3}`)}
	tests := []struct {
		name   string
		lists  [][]json.RawMessage
		allocs float64
	}{
		{name: "none", lists: nil, allocs: 1},
		{name: "empty lists", lists: [][]json.RawMessage{nil, {}}, allocs: 1},
		{name: "one", lists: [][]json.RawMessage{msgs[:1], nil}, allocs: 1},
		{name: "a turn", lists: [][]json.RawMessage{msgs[:1], msgs[1:2]}, allocs: 1},
		{name: "more than a turn", lists: [][]json.RawMessage{msgs[:2], msgs[2:]}, allocs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := AppendStore("/messages", tt.lists...)
			require.NotNil(t, resp)
			assert.Nil(t, resp.State)
			assert.Equal(t, AppendOps("/messages", tt.lists...), resp.Patch)
			if len(resp.Patch) > 0 {
				// Appending to the patch must not write past it.
				assert.Equal(t, len(resp.Patch), cap(resp.Patch))
			}
			assert.Equal(t, tt.allocs, testing.AllocsPerRun(100, func() { appendStored = AppendStore("/messages", tt.lists...) }))
		})
	}
}
