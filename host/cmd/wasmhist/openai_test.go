package main

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
)

const testKey = "sk-test-key"

// TestChatOpenAIChatCompletions runs the command against the strict fake
// Chat Completions server on loopback: a resumed session sends the stored
// history, and a tool call is followed by its tool message (the fake
// refuses the request otherwise).
func TestChatOpenAIChatCompletions(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t)
	srv.RequireAPIKey(testKey)
	r := invocation{dir: t.TempDir(), env: []string{"OPENAI_API_KEY=" + testKey}}
	chat := func(msg string) string {
		return r.ok(t, "chat", "--model", "openai-chat", "--base-url", srv.URL, "--model-name", "test-model",
			"--session", "c.json", "-m", msg)
	}

	srv.Enqueue(openaitest.Text("Noted: Italian food."))
	require.Contains(t, chat("I like Italian food"), "assistant: Noted: Italian food.", "first turn")

	srv.Enqueue(openaitest.Text("You like Italian food."))
	out := chat("what food do I like?")
	require.Contains(t, out, "assistant: You like Italian food.", "second turn")
	require.Contains(t, out, "revision 2", "second turn")
	req := srv.LastRequest()
	require.NotNil(t, req.Chat, "request is not a chat completion: %s", req.Body)
	require.Equal(t, "test-model", req.Chat.Model)
	var got []string
	for _, m := range req.Chat.Messages {
		got = append(got, m.Role+": "+m.Text())
	}
	want := []string{"user: I like Italian food", "assistant: Noted: Italian food.", "user: what food do I like?"}
	assert.True(t, containsInOrder(got, want), "a new process did not send the stored history;\ngot  %q\nwant %q in order", got, want)
	assert.False(t, req.Has("store"), "store was sent although nothing set it: %s", req.Body)

	srv.Enqueue(
		openaitest.Calls(openaitest.ToolCall{Name: "calculator", Arguments: `{"expression":"2+2"}`}),
		openaitest.Text("2+2 = 4."),
	)
	out = chat("what is 2+2?")
	assert.Regexp(t, `(?m)^tool: calculator \{"expression":"2\+2"\} -> \{.*"result":"4"\}$`, out, "tool activity missing")
	assert.Contains(t, out, "assistant: 2+2 = 4.", "reply after the tool missing")
	assert.Zero(t, srv.Pending(), "scripted replies unused")
}

// TestChatOpenAIResponses runs the command against the fake Responses
// server: the service keeps the conversation, so a new process continues
// it by id and sends only the new message, while the plugin keeps a copy
// that history reads.
func TestChatOpenAIResponses(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t)
	srv.RequireAPIKey(testKey)
	r := invocation{dir: t.TempDir(), env: []string{"OPENAI_API_KEY=" + testKey}}
	chat := func(msg string) string {
		return r.ok(t, "chat", "--model", "openai-responses", "--base-url", srv.URL, "--session", "r.json", "-m", msg)
	}

	srv.Enqueue(openaitest.Text("Noted."))
	out := chat("I like Italian food")
	m := regexp.MustCompile(`(?m)^service conversation: (\S+)$`).FindStringSubmatch(out)
	require.NotNil(t, m, "no service conversation reported:\n%s", out)
	assert.Contains(t, out, "(a copy: the model service keeps the conversation)", "output does not say the plugin keeps a copy")

	srv.Enqueue(openaitest.Text("You like Italian food."))
	out = chat("what food do I like?")
	require.Contains(t, out, "assistant: You like Italian food.", "second turn")
	req := srv.LastRequest()
	require.NotNil(t, req.Responses, "request is not a Responses request: %s", req.Body)
	require.Equal(t, m[1], req.Responses.PreviousResponseID, "second process did not continue the response")
	assert.False(t, req.Contains("I like Italian food"), "the service keeps the conversation, yet the history was resent: %s", req.Body)

	var rep historyReport
	require.NoError(t, json.Unmarshal([]byte(r.ok(t, "history", "--session", "r.json", "--json")), &rep))
	var texts []string
	for _, msg := range rep.Messages {
		texts = append(texts, msg.TextContent())
	}
	want := []string{"I like Italian food", "Noted.", "what food do I like?", "You like Italian food."}
	assert.Equal(t, want, texts, "the plugin's copy")
}

// TestChatOpenAIErrorIsOneLine reports a refused request in one line and
// leaves the session as it was.
func TestChatOpenAIErrorIsOneLine(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t)
	srv.RequireAPIKey("another-key")
	r := invocation{dir: t.TempDir(), env: []string{"OPENAI_API_KEY=" + testKey}}
	r.failsWithOneLine(t, exitFail, []string{"chat", "--model", "openai-chat", "--base-url", srv.URL, "--session", "e.json", "-m", "hi"},
		"wasmhist chat: running the agent", "401", "session file e.json is at revision 0", "OPENAI_API_KEY")
}

// containsInOrder reports whether want occurs in got as a subsequence.
func containsInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
