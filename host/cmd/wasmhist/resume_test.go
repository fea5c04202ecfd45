package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
)

// TestChatResumesInterruptedToolCall: with per-service-call persistence, a
// turn whose model call after a tool fails leaves the tool call open in
// the session. The next turn closes it (the Responses fake refuses a
// continuation that does not) and says so, one line per call.
func TestChatResumesInterruptedToolCall(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t)
	srv.RequireAPIKey(testKey)
	r := invocation{dir: t.TempDir(), env: []string{"OPENAI_API_KEY=" + testKey}}
	args := func(msg string) []string {
		return []string{"chat", "--model", "openai-responses", "--base-url", srv.URL, "--per-service-call",
			"--session", "r.json", "-m", msg}
	}

	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "call_r1", Name: "clock", Arguments: `{}`}),
		openaitest.Fail(500, "the server had an error"))
	res := r.wasmhist(t, args("what time is it?")...)
	require.NotZero(t, res.code, "the failed turn succeeded:\n%s", res.stdout)

	srv.Enqueue(openaitest.Text("It was noon."))
	out := r.ok(t, args("and now?")...)
	assert.Contains(t, out, "resumed: tool clock (call_r1) was interrupted; the model was sent the result it returned\n")
	assert.Equal(t, 1, strings.Count(out, "resumed: "), "one line per closed call:\n%s", out)
	assert.Contains(t, out, "assistant: It was noon.")
	req := srv.LastRequest()
	require.NotNil(t, req.Responses)
	items, err := req.Responses.Items()
	require.NoError(t, err)
	require.Len(t, items, 2, "the open call's output, then the message")
	assert.Equal(t, "function_call_output", items[0].Type)
	assert.Equal(t, "call_r1", items[0].CallID)

	srv.Enqueue(openaitest.Text("Still noon."))
	out = r.ok(t, args("and now?")...)
	assert.NotContains(t, out, "resumed: ", "a call is closed once")
}
