package openaitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type apiResult struct {
	status int
	body   map[string]any
	raw    []byte
}

func post(t *testing.T, s *Server, path, body string) apiResult {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return apiResult{status: resp.StatusCode, body: m, raw: raw}
}

func errMessage(r apiResult) string {
	e, _ := r.body["error"].(map[string]any)
	msg, _ := e["message"].(string)
	return msg
}

// sseData returns the data payloads of a server-sent event stream.
func sseData(t *testing.T, raw []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestChat(t *testing.T) {
	tests := []struct {
		name       string
		queue      []Reply
		body       string
		wantStatus int
		wantInBody string
		wantQueue  int
	}{
		{
			name:       "text reply",
			queue:      []Reply{Text("hello there")},
			body:       `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 200, wantInBody: `"content":"hello there"`,
		},
		{
			name:       "tool call reply",
			queue:      []Reply{Calls(ToolCall{ID: "call_x", Name: "clock", Arguments: `{"tz":"UTC"}`})},
			body:       `{"model":"m","messages":[{"role":"user","content":"time?"}],"tools":[{"type":"function","function":{"name":"clock","parameters":{"type":"object"}}}]}`,
			wantStatus: 200, wantInBody: `"finish_reason":"tool_calls"`,
		},
		{
			name:       "orphan tool call is refused and takes no reply",
			queue:      []Reply{Text("unused")},
			body:       `{"model":"m","messages":[{"role":"user","content":"u"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]},{"role":"user","content":"v"}]}`,
			wantStatus: 400, wantInBody: "did not have response messages: c1", wantQueue: 1,
		},
		{
			name:       "tool message without a call",
			queue:      []Reply{Text("unused")},
			body:       `{"model":"m","messages":[{"role":"user","content":"u"},{"role":"tool","tool_call_id":"c1","content":"x"}]}`,
			wantStatus: 400, wantInBody: "preceeding", wantQueue: 1,
		},
		{
			name:       "bad tool name",
			queue:      []Reply{Text("unused")},
			body:       `{"model":"m","messages":[{"role":"user","content":"u"}],"tools":[{"type":"function","function":{"name":"no spaces"}}]}`,
			wantStatus: 400, wantInBody: "does not match pattern", wantQueue: 1,
		},
		{
			name:       "missing model",
			body:       `{"messages":[{"role":"user","content":"u"}]}`,
			wantStatus: 400, wantInBody: "model",
		},
		{
			name:       "scripted error",
			queue:      []Reply{Fail(429, "Rate limit reached")},
			body:       `{"model":"m","messages":[{"role":"user","content":"u"}]}`,
			wantStatus: 429, wantInBody: "Rate limit reached",
		},
		{
			name:       "nothing queued",
			body:       `{"model":"m","messages":[{"role":"user","content":"u"}]}`,
			wantStatus: 500, wantInBody: "no reply queued",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(t)
			s.Enqueue(tt.queue...)
			r := post(t, s, "/chat/completions", tt.body)
			require.Equal(t, tt.wantStatus, r.status, "status; body %s", r.raw)
			require.Contains(t, string(r.raw), tt.wantInBody, "body")
			if r.status >= 400 {
				require.NotEmpty(t, errMessage(r), "error body is not OpenAI-shaped: %s", r.raw)
			}
			require.Equal(t, tt.wantQueue, s.Pending())
			require.Equal(t, tt.body, string(s.LastRequest().Body))
		})
	}
}

func TestRequestRecording(t *testing.T) {
	s := NewServer(t)
	s.Enqueue(Text("a"), Text("b"))
	post(t, s, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"u"}]}`)
	post(t, s, "/chat/completions", `{"model":"m","store":false,"messages":[{"role":"user","content":"u"}]}`)
	reqs := s.Requests()
	require.Len(t, reqs, 2, "recorded requests")
	require.False(t, reqs[0].Has("store"), "first request has no store field but Has says it does")
	v, ok := reqs[1].Field("store")
	require.True(t, ok, "second request has a store field")
	require.Equal(t, "false", string(v), "second request store")
	require.NotNil(t, reqs[1].Chat, "decoded chat request")
	require.NotNil(t, reqs[1].Chat.Store, "decoded chat request lost store=false")
	require.False(t, *reqs[1].Chat.Store, "decoded chat request lost store=false")
	require.True(t, reqs[0].Contains(`"role":"user"`), "Contains does not search the raw body")
	require.False(t, reqs[0].Contains("sentinel"), "Contains finds what the raw body lacks")
}

func TestAPIKey(t *testing.T) {
	s := NewServer(t)
	s.RequireAPIKey("sk-test")
	s.Enqueue(Text("ok"))
	body := `{"model":"m","messages":[{"role":"user","content":"u"}]}`
	r := post(t, s, "/chat/completions", body)
	require.Equal(t, 401, r.status, "without key")
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, "with key")
}

func TestHandler(t *testing.T) {
	s := NewServer(t)
	s.Enqueue(Text("queued first"))
	s.Handle(func(r Request) Reply {
		return Text("echo: " + r.Chat.Messages[len(r.Chat.Messages)-1].Text())
	})
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"ping"}]}]}`
	r := post(t, s, "/chat/completions", body)
	require.Contains(t, string(r.raw), "queued first", "queue not used before the handler")
	r = post(t, s, "/chat/completions", body)
	require.Contains(t, string(r.raw), "echo: ping", "handler not used")
}

func TestChatStream(t *testing.T) {
	s := NewServer(t)
	s.Enqueue(Reply{Text: "one two", ToolCalls: []ToolCall{{ID: "c1", Name: "clock", Arguments: `{"tz":"UTC"}`}}})
	r := post(t, s, "/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"u"}]}`)
	data := sseData(t, r.raw)
	require.NotEmpty(t, data, "stream does not end with [DONE]")
	require.Equal(t, "[DONE]", data[len(data)-1], "stream does not end with [DONE]: %q", data)
	var text, args, finish string
	var usage bool
	for _, d := range data[:len(data)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct{} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal([]byte(d), &c), "chunk %q", d)
		usage = usage || c.Usage != nil
		for _, ch := range c.Choices {
			text += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	require.Equal(t, "one two", text, "text")
	require.Equal(t, `{"tz":"UTC"}`, args, "arguments")
	require.Equal(t, "tool_calls", finish, "finish")
	require.True(t, usage, "no usage chunk")
}

func TestHoldOpenReportsDisconnect(t *testing.T) {
	for _, path := range []string{"/chat/completions", "/responses"} {
		t.Run(path, func(t *testing.T) {
			s := NewServer(t)
			s.Enqueue(Reply{Text: "partial answer", HoldOpen: true})
			key := "messages"
			if path == "/responses" {
				key = "input"
			}
			body := `{"model":"m","stream":true,"` + key + `":[{"role":"user","content":"u"}]}`
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			// Read the first event, then walk away like a consumer that
			// stopped early.
			br := bufio.NewReader(resp.Body)
			_, err = br.ReadString('\n')
			require.NoError(t, err)
			resp.Body.Close()
			select {
			case <-s.Disconnected():
			case <-time.After(10 * time.Second):
				require.FailNow(t, "server never saw the client go away")
			}
		})
	}
}
