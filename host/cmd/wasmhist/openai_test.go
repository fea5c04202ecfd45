package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

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
	if out := chat("I like Italian food"); !strings.Contains(out, "assistant: Noted: Italian food.") {
		t.Fatalf("first turn:\n%s", out)
	}

	srv.Enqueue(openaitest.Text("You like Italian food."))
	out := chat("what food do I like?")
	if !strings.Contains(out, "assistant: You like Italian food.") || !strings.Contains(out, "revision 2") {
		t.Fatalf("second turn:\n%s", out)
	}
	req := srv.LastRequest()
	if req.Chat == nil || req.Chat.Model != "test-model" {
		t.Fatalf("request is not a chat completion for test-model: %s", req.Body)
	}
	var got []string
	for _, m := range req.Chat.Messages {
		got = append(got, m.Role+": "+m.Text())
	}
	want := []string{"user: I like Italian food", "assistant: Noted: Italian food.", "user: what food do I like?"}
	if !containsInOrder(got, want) {
		t.Errorf("a new process did not send the stored history;\ngot  %q\nwant %q in order", got, want)
	}
	if req.Has("store") {
		t.Errorf("store was sent although nothing set it: %s", req.Body)
	}

	srv.Enqueue(
		openaitest.Calls(openaitest.ToolCall{Name: "calculator", Arguments: `{"expression":"2+2"}`}),
		openaitest.Text("2+2 = 4."),
	)
	out = chat("what is 2+2?")
	if !regexp.MustCompile(`(?m)^tool: calculator \{"expression":"2\+2"\} -> \{.*"result":"4"\}$`).MatchString(out) {
		t.Errorf("tool activity missing:\n%s", out)
	}
	if !strings.Contains(out, "assistant: 2+2 = 4.") {
		t.Errorf("reply after the tool missing:\n%s", out)
	}
	if srv.Pending() != 0 {
		t.Errorf("%d scripted replies unused", srv.Pending())
	}
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
	if m == nil {
		t.Fatalf("no service conversation reported:\n%s", out)
	}
	if !strings.Contains(out, "(a copy: the model service keeps the conversation)") {
		t.Errorf("output does not say the plugin keeps a copy:\n%s", out)
	}

	srv.Enqueue(openaitest.Text("You like Italian food."))
	out = chat("what food do I like?")
	if !strings.Contains(out, "assistant: You like Italian food.") {
		t.Fatalf("second turn:\n%s", out)
	}
	req := srv.LastRequest()
	if req.Responses == nil || req.Responses.PreviousResponseID != m[1] {
		t.Fatalf("second process did not continue response %s: %s", m[1], req.Body)
	}
	if req.Contains("I like Italian food") {
		t.Errorf("the service keeps the conversation, yet the history was resent: %s", req.Body)
	}

	var rep historyReport
	if err := json.Unmarshal([]byte(r.ok(t, "history", "--session", "r.json", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, msg := range rep.Messages {
		texts = append(texts, msg.TextContent())
	}
	want := []string{"I like Italian food", "Noted.", "what food do I like?", "You like Italian food."}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("the plugin's copy = %q, want %q", texts, want)
	}
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
