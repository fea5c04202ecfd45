package host

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

func TestDecodedMessages(t *testing.T) {
	raws := []json.RawMessage{
		json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"hi"}],"additional_properties":{"k":[1]}}`),
		json.RawMessage(`{"role":"assistant","contents":[{"type":"function_call","call_id":"c","name":"f","arguments":{"a":1}}],"source":{"type":"chat_history"}}`),
	}
	tests := []struct {
		name string
		raws []json.RawMessage
		want string // error text; "" for success
	}{
		{"valid", raws, ""},
		{"bad role", append(append([]json.RawMessage{}, raws...), json.RawMessage(`{"role":"robot","contents":[]}`)), `from_state /h/2: role "robot" is not a message role`},
		{"not a message", append(append([]json.RawMessage{}, raws...), json.RawMessage(`{"role":1}`)), `from_state /h/2: not a message`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c decodedMessages
			for range 2 { // the second pass is served from memory
				msgs, err := decodeStoredMessages(&c, "provide", "/h", tt.raws)
				if tt.want != "" {
					require.ErrorIs(t, err, ErrInvalidOutput)
					assert.Contains(t, err.Error(), tt.want)
					continue
				}
				require.NoError(t, err)
				for i, raw := range tt.raws {
					var want abi.Message
					require.NoError(t, json.Unmarshal(raw, &want))
					assert.Equal(t, want, msgs[i])
				}
				// What a caller gets is its own: editing it changes nothing
				// a later decode returns.
				msgs[0].Contents[0].Text = "edited"
				msgs[0].AdditionalProperties["k"][1] = '9'
				msgs[1].Contents[0].Arguments[1] = 'X'
				msgs[1].Source.ID = "edited"
			}
		})
	}
}

func TestDecodedMessagesBounded(t *testing.T) {
	var c decodedMessages
	big := json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"` + strings.Repeat("x", 1<<20) + `"}]}`)
	for i := range 20 {
		raw := append(json.RawMessage{}, big...)
		raw[len(raw)-5] = byte('a' + i)
		_, err := decodeStoredMessages(&c, "provide", "/h", []json.RawMessage{raw})
		require.NoError(t, err)
		require.LessOrEqual(t, c.bytes, maxDecodedBytes)
	}
}
