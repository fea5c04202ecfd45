package host

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/schemas"
)

var plainMessageCases = []struct {
	name  string
	raw   string
	plain bool // plainMessage accepts it without the schema library
	valid bool // the message schema accepts it
}{
	{"text", `{"role":"user","contents":[{"type":"text","text":"line 1"}]}`, true, true},
	{"source", `{"role":"user","contents":[{"type":"text","text":"a"}],"source":{"type":"external"}}`, true, true},
	{"source with id", `{"role":"system","contents":[],"source":{"id":"h","type":"context_provider"}}`, true, true},
	{"every plain member", ` {"author_name":"a","message_id":"m","contents":[{"text":"t\n\u00e9","type":"reasoning"},{"type":"text"}],"role":"tool"} `, true, true},
	{"escaped key", `{"r\u006fle":"assistant","contents":[]}`, true, true},

	{"escaped role", `{"role":"\u0075ser","contents":[]}`, false, true},
	{"created_at", `{"role":"user","contents":[],"created_at":"2025-01-01T00:00:00Z"}`, false, true},
	{"unknown member", `{"role":"user","contents":[],"x":1}`, false, true},
	{"function call", `{"role":"assistant","contents":[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]}`, false, true},
	{"duplicate role", `{"role":"user","role":"bot","contents":[]}`, false, false},
	{"duplicate contents", `{"role":"user","contents":[],"contents":[1]}`, false, false},
	{"duplicate type", `{"role":"user","contents":[{"type":"text","type":""}]}`, false, false},
	{"duplicate source type", `{"role":"user","contents":[],"source":{"type":"external","type":"x"}}`, false, false},

	{"unknown role", `{"role":"bot","contents":[]}`, false, false},
	{"no role", `{"contents":[]}`, false, false},
	{"no contents", `{"role":"user"}`, false, false},
	{"contents not an array", `{"role":"user","contents":{}}`, false, false},
	{"content not an object", `{"role":"user","contents":["text"]}`, false, false},
	{"content without a type", `{"role":"user","contents":[{"text":"a"}]}`, false, false},
	{"empty content type", `{"role":"user","contents":[{"type":""}]}`, false, false},
	{"call without its id", `{"role":"assistant","contents":[{"type":"function_call","name":"f"}]}`, false, false},
	{"text not a string", `{"role":"user","contents":[{"type":"text","text":1}]}`, false, false},
	{"unknown source", `{"role":"user","contents":[],"source":{"type":"model"}}`, false, false},
	{"source without a type", `{"role":"user","contents":[],"source":{}}`, false, false},
	{"message_id not a string", `{"role":"user","contents":[],"message_id":1}`, false, false},
	{"null", `null`, false, false},
	{"array", `[]`, false, false},
	{"truncated", `{"role":"user","contents":[`, false, false},
	{"trailing data", `{"role":"user","contents":[]}{}`, false, false},
	// The library's parse of this number fails, and it dereferenced nil:
	// a plugin's message killed the host.
	{"number past the library's parse", `{"role":"assistant","contents":[{"type":"usage","usage":{"input_tokens":1e1000001}}]}`, false, false},
}

func TestPlainMessage(t *testing.T) {
	ms := schema.Project(schemas.Message)
	for _, tc := range plainMessageCases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.plain, plainMessage([]byte(tc.raw)), "plainMessage")
			err := ms.Validate(json.RawMessage(tc.raw))
			if tc.valid {
				require.NoError(t, err, "the schema's verdict")
			} else {
				require.ErrorIs(t, err, schema.ErrInvalid, "the schema's verdict")
			}
			// validateMessage says what the schema says, through
			// either path.
			if verr := validateMessage(context.Background(), json.RawMessage(tc.raw)); tc.valid {
				require.NoError(t, verr)
			} else {
				require.ErrorIs(t, verr, schema.ErrInvalid)
			}
		})
	}
}

// TestValidateMessageAllocates pins why plainMessage exists: accepting a
// provide's plain message must not allocate (the schema library allocated
// 13.6 kB in 249 objects for it, three times a database turn).
func TestValidateMessageAllocates(t *testing.T) {
	raw := json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"line 1"}],"source":{"type":"external"}}`)
	require.NoError(t, validateMessage(context.Background(), raw))
	assert.Zero(t, testing.AllocsPerRun(20, func() { _ = validateMessage(context.Background(), raw) }))
}

// FuzzPlainMessage checks that the schema accepts every message
// plainMessage accepts, and that it decodes.
func FuzzPlainMessage(f *testing.F) {
	for _, tc := range plainMessageCases {
		f.Add([]byte(tc.raw))
	}
	ms := schema.Project(schemas.Message)
	f.Fuzz(func(t *testing.T, b []byte) {
		if !plainMessage(b) {
			return
		}
		require.NoError(t, ms.Validate(b), "plainMessage accepted what the schema refuses")
		var m abi.Message
		require.NoError(t, json.Unmarshal(b, &m))
	})
}
