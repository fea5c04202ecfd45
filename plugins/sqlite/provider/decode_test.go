package provider

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// TestDecode checks the state and config are read as encoding/json read
// them into State and Config: unknown members ignored, null the zero
// value, anything else invalid_argument naming what failed to decode.
func TestDecode(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name          string
		state, config string
		want          State
		wantMax       int
		wantErr       error
		errText       string
	}{
		{name: "key and window", state: `{"session_key":"` + key + `"}`, config: `{"max_messages":7}`, want: State{SessionKey: key}, wantMax: 7},
		{name: "initial state, no config", state: `{}`, wantMax: DefaultMaxMessages},
		{name: "null members and unknown ones", state: ` {"x":[1,{"y":null}],"session_key":null} `, config: `{"max_messages":null,"z":"w"}`, wantMax: DefaultMaxMessages},
		{name: "null config", state: `{}`, config: `null`, wantMax: DefaultMaxMessages},
		{name: "state omitted", state: ``, wantErr: sdk.ErrStateOmitted},
		{name: "null state", state: `null`, wantErr: sdk.ErrStateOmitted},
		{name: "state not an object", state: `["k"]`, wantErr: abi.ErrInvalidArgument,
			errText: "sqlite: decode state: invalid argument: malformed JSON at offset 0: want an object"},
		{name: "key not a string", state: `{"session_key":7}`, wantErr: abi.ErrInvalidArgument,
			errText: "sqlite: decode state: invalid argument: malformed JSON at offset 15: want a string"},
		{name: "trailing bytes", state: `{}x`, wantErr: abi.ErrInvalidArgument},
		{name: "window with a fraction", state: `{}`, config: `{"max_messages":2.5}`, wantErr: abi.ErrInvalidArgument,
			errText: "sqlite: decode config: invalid argument: malformed JSON at offset 16: want an integer"},
		{name: "negative window", state: `{}`, config: `{"max_messages":-1}`, wantErr: abi.ErrInvalidArgument,
			errText: "sqlite: config: invalid argument: max_messages must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lastDecoded.state, lastDecoded.config = "", ""
			var config json.RawMessage
			if tt.config != "" {
				config = json.RawMessage(tt.config)
			}
			st, cfg, err := decode(json.RawMessage(tt.state), config)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				if tt.errText != "" {
					assert.EqualError(t, err, tt.errText)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, st)
			assert.Equal(t, tt.wantMax, cfg.MaxMessages)
		})
	}
}
