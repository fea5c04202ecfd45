package portable_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/portable"
)

// toolHistory is a conversation with parallel tool calls, a tool error and
// parts the Chat Completions array does not carry (reasoning, usage).
func toolHistory() []abi.Message {
	call := func(id, city string) abi.Content {
		return abi.Content{Type: abi.ContentFunctionCall, CallID: id, Name: "weather", Arguments: json.RawMessage(`{"city":"` + city + `"}`)}
	}
	return []abi.Message{
		abi.NewMessage(abi.RoleSystem, "You are terse."),
		abi.NewMessage(abi.RoleUser, "Weather in Oslo and Bergen?"),
		{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentReasoning, Text: "two cities"}, call("c1", "Oslo"), call("c2", "Bergen")}},
		{Role: abi.RoleTool, Contents: []abi.Content{
			{Type: abi.ContentFunctionResult, CallID: "c1", Result: json.RawMessage(`{"temp":4}`)},
			{Type: abi.ContentFunctionResult, CallID: "c2", Error: "station offline"},
		}},
		{Role: abi.RoleAssistant, Contents: []abi.Content{abi.Text("Oslo 4 °C; Bergen unknown."), {Type: abi.ContentUsage, Usage: &abi.Usage{TotalTokens: 9}}}},
	}
}

func seq(msgs []abi.Message) func(func(abi.Message, error) bool) {
	return func(yield func(abi.Message, error) bool) {
		for _, m := range msgs {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// TestExportedHistoryIsAcceptedByChatServer: a history read from a
// portable document and written as a Chat Completions messages array is
// accepted by the strict fake server, which enforces the real service's
// ordering rules.
func TestExportedHistoryIsAcceptedByChatServer(t *testing.T) {
	doc := export(t, demoSession(), map[string][]abi.Message{"history": toolHistory()})
	r, err := portable.NewReader(bytes.NewReader(doc), portable.Limits{})
	require.NoError(t, err)
	var out bytes.Buffer
	for sr, err := range r.Slots() {
		require.NoError(t, err)
		if sr.Key == "history" {
			require.NoError(t, portable.WriteOpenAI(&out, sr.Messages()))
		}
	}
	var msgs []openaitest.ChatMessage
	require.NoError(t, json.Unmarshal(out.Bytes(), &msgs), "%s", out.Bytes())
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		roles[i] = m.Role
	}
	require.Equal(t, []string{"system", "user", "assistant", "tool", "tool", "assistant"}, roles)

	srv := openaitest.NewServer(t)
	srv.Enqueue(openaitest.Text("ok"))
	body := `{"model":"m","messages":` + out.String() + `}`
	resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", answer)
	assert.Equal(t, 0, srv.Pending(), "the server answered the request")
}

// TestOpenAIRoundTrip: a messages array another framework wrote reads as
// abi messages and writes back as the same array.
func TestOpenAIRoundTrip(t *testing.T) {
	in := readFile(t, "testdata/chat.foreign.json")
	var msgs []abi.Message
	for m, err := range portable.ReadOpenAI(bytes.NewReader(in), portable.Limits{}) {
		require.NoError(t, err)
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, 10)
	assert.Equal(t, abi.RoleTool, msgs[3].Role)
	assert.Equal(t, []string{"call_1", "call_2"}, msgs[2].CallIDs())

	var out bytes.Buffer
	require.NoError(t, portable.WriteOpenAI(&out, seq(msgs)))
	var want, got any
	require.NoError(t, json.Unmarshal(in, &want))
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, want, got)
}

func TestReadOpenAIRefuses(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    error
		message int
		inText  string
	}{
		{"not an array", `{"role":"user"}`, portable.ErrMalformed, -1, "not an array"},
		{"unknown role", `[{"role":"user","content":"a"},{"role":"robot","content":"b"}]`, portable.ErrMalformed, 1, `"robot"`},
		{"no role", `[{"content":"b"}]`, portable.ErrMalformed, 0, "role none"},
		{"an image", `[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]`, portable.ErrConvert, 0, "image_url"},
		{"a refusal", `[{"role":"assistant","refusal":"no"}]`, portable.ErrConvert, 0, "refusal"},
		{"the function role", `[{"role":"function","name":"f","content":"x"}]`, portable.ErrConvert, 0, "function role"},
		{"arguments not an object", `[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]`, portable.ErrInvalidMessage, 0, "/arguments"},
		{"a user message without content", `[{"role":"user"}]`, portable.ErrConvert, 0, "content"},
		{"truncated", `[{"role":"user","content":"a"},{"role":"us`, portable.ErrTruncated, 1, ""},
		{"data after the array", `[] []`, portable.ErrMalformed, -1, "after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			for _, e := range portable.ReadOpenAI(strings.NewReader(tt.doc), portable.Limits{}) {
				if e != nil {
					err = e
				}
			}
			require.ErrorIs(t, err, tt.want)
			var pe *portable.Error
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.message, pe.Message)
			assert.Contains(t, err.Error(), tt.inText)
		})
	}
}

func TestWriteOpenAIRefusesMedia(t *testing.T) {
	msgs := []abi.Message{abi.NewMessage(abi.RoleUser, "a"), {Role: abi.RoleUser, Contents: []abi.Content{{Type: abi.ContentURI, URI: "https://x/a.png"}}}}
	err := portable.WriteOpenAI(io.Discard, seq(msgs))
	require.ErrorIs(t, err, portable.ErrConvert)
	var pe *portable.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 1, pe.Message)
}
