package host

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
)

func TestSelectFromState(t *testing.T) {
	msg := `{"role":"user","contents":[{"type":"text","text":"hi"}]}`
	tests := []struct {
		name    string
		state   string
		pointer string
		want    int
		wantErr bool
	}{
		{name: "array", state: `{"messages":[` + msg + `,` + msg + `]}`, pointer: "/messages", want: 2},
		{name: "missing member selects nothing", state: `{}`, pointer: "/messages"},
		{name: "null selects nothing", state: `{"messages":null}`, pointer: "/messages"},
		{name: "not an array", state: `{"messages":{}}`, pointer: "/messages", wantErr: true},
		{name: "index out of range", state: `{"h":[]}`, pointer: "/h/3", wantErr: true},
		{name: "not a message", state: `{"messages":[1]}`, pointer: "/messages", wantErr: true},
	}
	p := &Plugin{docs: statepatch.NewCache(4)}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raws, msgs, err := p.selectFromState(abi.ExportProvide, json.RawMessage(tt.state), statepatch.Claim{}, &abi.StateSelection{Pointer: tt.pointer}, true)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidOutput)
				return
			}
			require.NoError(t, err)
			assert.Len(t, raws, tt.want)
			assert.Len(t, msgs, tt.want)
		})
	}
}

// What a selection hands out is the caller's own, with or without a
// window, although the decoded messages it starts from are the plugin's
// memory of them: editing one changes nothing a later selection returns.
func TestSelectFromStateHandsOutCopies(t *testing.T) {
	state := json.RawMessage(`{"messages":[` +
		`{"role":"system","contents":[{"type":"text","text":"be brief"}]},` +
		`{"role":"user","contents":[{"type":"text","text":"one"}],"additional_properties":{"k":[1]}},` +
		`{"role":"assistant","contents":[{"type":"function_call","call_id":"c","name":"f","arguments":{"a":1}}]},` +
		`{"role":"tool","contents":[{"type":"function_result","call_id":"c","result":{"r":2}}]}]}`)
	tests := []struct {
		name   string
		window *abi.Window
		want   int
	}{
		{"whole history", nil, 4},
		{"window", &abi.Window{MaxMessages: 3}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Plugin{docs: statepatch.NewCache(4)}
			sel := &abi.StateSelection{Pointer: "/messages", Window: tt.window}
			_, want, err := p.selectFromState(abi.ExportProvide, state, statepatch.Claim{}, sel, false)
			require.NoError(t, err)
			require.Len(t, want, tt.want)
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			for range 2 { // the second round is served from memory
				_, got, err := p.selectFromState(abi.ExportProvide, state, statepatch.Claim{}, sel, false)
				require.NoError(t, err)
				gotJSON, err := json.Marshal(got)
				require.NoError(t, err)
				require.JSONEq(t, string(wantJSON), string(gotJSON))
				for i := range got {
					got[i].Role = "edited"
					for j := range got[i].Contents {
						c := &got[i].Contents[j]
						c.Text = "edited"
						if len(c.Arguments) > 0 {
							c.Arguments[1] = 'X'
						}
						if len(c.Result) > 0 {
							c.Result[1] = 'X'
						}
					}
					for _, v := range got[i].AdditionalProperties {
						v[1] = '9'
					}
				}
			}
		})
	}
}
