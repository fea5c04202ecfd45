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
			raws, msgs, err := p.selectFromState(abi.ExportProvide, json.RawMessage(tt.state), &abi.StateSelection{Pointer: tt.pointer}, true)
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
