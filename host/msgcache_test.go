package host

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/schemas"
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
				msgs, err := decodeStoredMessages(&c, "provide", "/h", tt.raws, false, 0)
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
		_, err := decodeStoredMessages(&c, "provide", "/h", []json.RawMessage{raw}, false, 0)
		require.NoError(t, err)
		require.LessOrEqual(t, c.bytes, maxDecodedBytes)
	}
}

// A history larger than maxDecodedBytes is remembered whole, so the next
// provide of it and one turn more decodes one turn: a fixed bound below
// the history made every provide decode all of it.
func TestDecodedMessagesRemembersWholeHistory(t *testing.T) {
	msg := func(i int) json.RawMessage {
		return json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"` + strings.Repeat("x", 64<<10) + strconv.Itoa(i) + `"}]}`)
	}
	var history []json.RawMessage
	for i := range 3 * maxDecodedBytes / (64 << 10) { // 24 MiB
		history = append(history, msg(i))
	}
	var c decodedMessages
	largest := 0
	tests := []struct {
		name string
		raws []json.RawMessage
	}{
		{"first", history},
		{"a turn more", append(history[:len(history):len(history)], msg(-1), msg(-2))},
		{"a shorter history", history[:10]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeStoredMessages(&c, "provide", "/h", tt.raws, false, 0)
			require.NoError(t, err)
			for i, raw := range tt.raws {
				require.Contains(t, c.m, string(raw), "message %d of %d is not remembered", i, len(tt.raws))
			}
			size := 0
			for _, raw := range tt.raws {
				size += len(raw)
			}
			largest = max(largest, size)
			require.LessOrEqual(t, c.bytes, max(maxDecodedBytes, 2*largest))
		})
	}
}

// TestValueMessagesValidatedOnce checks that messages provide returns by
// value are checked against the message schema once per content: a window
// that moves by a turn validates the new messages only, and a message the
// schema refuses is refused every time, never remembered.
func TestValueMessagesValidatedOnce(t *testing.T) {
	msg := func(i int) json.RawMessage {
		return json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"` + strconv.Itoa(i) + `"}]}`)
	}
	// Decodes into abi.Message, but the schema refuses it: no contents.
	bad := json.RawMessage(`{"role":"user"}`)
	tests := []struct {
		name      string
		raws      []json.RawMessage
		validated int    // validations on this pass
		want      string // error text; "" for success
	}{
		{"first window", []json.RawMessage{msg(1), msg(2), msg(3)}, 3, ""},
		{"same window", []json.RawMessage{msg(1), msg(2), msg(3)}, 0, ""},
		{"moved by one", []json.RawMessage{msg(2), msg(3), msg(4)}, 1, ""},
		{"refused", []json.RawMessage{msg(3), msg(4), bad}, 1, "messages[2]"},
		{"refused again", []json.RawMessage{msg(3), msg(4), bad}, 1, "messages[2]"},
	}
	c := decodedMessages{floor: 1 << 20}
	ms := schema.Project(schemas.Message)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			validated := 0
			msgs := make([]abi.Message, len(tt.raws))
			i, err := c.decode(tt.raws, msgs, false, func(raw json.RawMessage) error {
				validated++
				return ms.Validate(raw)
			}, nil)
			assert.Equal(t, tt.validated, validated)
			if tt.want != "" {
				require.Error(t, err)
				assert.Equal(t, 2, i)
				_, err := decodeValueMessages(context.Background(), &c, "provide", "messages", tt.raws)
				require.ErrorIs(t, err, ErrInvalidOutput)
				assert.Contains(t, err.Error(), tt.want)
				return
			}
			require.NoError(t, err)
			for i, raw := range tt.raws {
				var want abi.Message
				require.NoError(t, json.Unmarshal(raw, &want))
				assert.Equal(t, want, msgs[i])
			}
		})
	}
}
