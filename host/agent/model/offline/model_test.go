package offline_test

import (
	"context"
	"encoding/json"

	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
)

var fixedNow = func() time.Time { return time.Date(2024, 1, 2, 12, 34, 56, 0, time.UTC) }

func user(s string) abi.Message      { return abi.NewMessage(abi.RoleUser, s) }
func assistant(s string) abi.Message { return abi.NewMessage(abi.RoleAssistant, s) }

func specs() []model.ToolSpec {
	var out []model.ToolSpec
	for _, t := range offline.Tools(fixedNow) {
		out = append(out, t.Spec())
	}
	return out
}

func TestAnswers(t *testing.T) {
	tests := []struct {
		name      string
		msgs      []abi.Message
		noTools   bool
		wantText  string
		wantCalls []string // name:arguments
	}{
		{name: "like is acknowledged", msgs: []abi.Message{user("I like Italian food")},
			wantText: "Noted: you like Italian food. I'll remember that."},
		{name: "recall food from history", msgs: []abi.Message{
			user("I like Italian food"), assistant("Noted: you like Italian food. I'll remember that."), user("What food do I like?"),
		}, wantText: "You told me you like Italian food."},
		{name: "no hidden state: nothing in the request, nothing recalled", msgs: []abi.Message{user("What food do I like?")},
			wantText: "You haven't told me what food you like."},
		{name: "topic filters likes", msgs: []abi.Message{
			user("I love jazz and I like Italian food."), user("what music do I like?"),
		}, wantText: "You haven't told me what music you like."},
		{name: "all likes", msgs: []abi.Message{
			user("I love jazz and I like Italian food."), user("I enjoy long walks"), user("what do I like"),
		}, wantText: "You told me you love jazz, you like Italian food and you enjoy long walks."},
		{name: "first person reflected", msgs: []abi.Message{user("I like my grandmother's cooking"), user("what do I like?")},
			wantText: "You told me you like your grandmother's cooking."},
		{name: "assistant words are not evidence", msgs: []abi.Message{assistant("I like Italian food"), user("what do I like?")},
			wantText: "You haven't told me what you like."},
		{name: "name", msgs: []abi.Message{user("Hi, my name is Ada."), user("What's my name?")},
			wantText: "Your name is Ada."},
		{name: "latest name wins", msgs: []abi.Message{user("my name is Ada"), user("call me Grace"), user("who am I")},
			wantText: "Your name is Grace."},
		{name: "unknown name", msgs: []abi.Message{user("what is my name?")}, wantText: "You haven't told me your name."},
		{name: "name acknowledged", msgs: []abi.Message{user("My name is Ada Lovelace")}, wantText: "Nice to meet you, Ada Lovelace."},
		{name: "favourite", msgs: []abi.Message{user("My favorite color is blue"), user("what is my favourite color?")},
			wantText: "You told me your favourite color is blue."},
		{name: "remember and recall", msgs: []abi.Message{
			user("Please remember that my meeting is at 3pm"), user("What did I ask you to remember?"),
		}, wantText: "You asked me to remember that your meeting is at 3pm."},
		{name: "remember is acknowledged", msgs: []abi.Message{user("remember that I parked on level 2")},
			wantText: "I'll remember that you parked on level 2."},
		{name: "summary", msgs: []abi.Message{
			user("My name is Ada and I like tea."), user("remember the milk"), user("What do you know about me?"),
		}, wantText: "You told me that your name is Ada, you like tea and you asked me to remember the milk."},
		{name: "empty summary", msgs: []abi.Message{user("what did I tell you?")},
			wantText: "You haven't told me anything about yourself yet."},
		{name: "time calls the clock", msgs: []abi.Message{user("What time is it?")},
			wantCalls: []string{`clock:{}`}},
		{name: "arithmetic calls the calculator", msgs: []abi.Message{user("what is (2 + 3) * 4?")},
			wantCalls: []string{`calculator:{"expression":"(2 + 3) * 4"}`}},
		{name: "decimals stay one expression", msgs: []abi.Message{user("compute 3.5 * 2")},
			wantCalls: []string{`calculator:{"expression":"3.5 * 2"}`}},
		{name: "two tools in one turn", msgs: []abi.Message{user("What time is it, and what is 6*7?")},
			wantCalls: []string{`clock:{}`, `calculator:{"expression":"6*7"}`}},
		{name: "statement and tool", msgs: []abi.Message{user("I like tea. What time is it?")},
			wantText: "Noted: you like tea. I'll remember that.", wantCalls: []string{`clock:{}`}},
		{name: "a date in a statement is not arithmetic", msgs: []abi.Message{user("remember the 2024-05-01 deadline")},
			wantText: "I'll remember the 2024-05-01 deadline."},
		{name: "no calculator offered: direct", msgs: []abi.Message{user("what is 6 * 7")}, noTools: true,
			wantText: "6 * 7 = 42."},
		{name: "no clock offered", msgs: []abi.Message{user("what time is it")}, noTools: true,
			wantText: "I can't tell the time: no clock tool is available."},
		{name: "greeting by name", msgs: []abi.Message{user("my name is Ada"), assistant("Nice to meet you, Ada."), user("hello")},
			wantText: "Hello, Ada! How can I help?"},
		{name: "greeting", msgs: []abi.Message{user("Hi")}, wantText: "Hello! " + offline.Help},
		{name: "thanks", msgs: []abi.Message{user("thanks!")}, wantText: "You're welcome."},
		{name: "fallback", msgs: []abi.Message{user("Tell me a story about dragons")}, wantText: offline.Help},
		{name: "no user message", msgs: nil, wantText: offline.Help},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := model.Request{Messages: tt.msgs, Tools: specs()}
			if tt.noTools {
				req.Tools = nil
			}
			res, err := offline.New().Complete(context.Background(), req)
			require.NoError(t, err)
			m := res.Messages[0]
			assert.Equal(t, tt.wantText, m.TextContent())
			var calls []string
			for _, c := range m.Contents {
				if c.Type == abi.ContentFunctionCall {
					calls = append(calls, c.Name+":"+string(c.Arguments))
				}
			}
			assert.Equal(t, tt.wantCalls, calls, "calls")
			wantFinish := "stop"
			if len(tt.wantCalls) > 0 {
				wantFinish = "tool_calls"
			}
			assert.Equal(t, wantFinish, res.FinishReason, "finish")
			assert.Empty(t, res.ConversationID, "conversation")
			assert.Equal(t, abi.RoleAssistant, m.Role, "role")
		})
	}
}

// runTools executes the calls of the model's message with the offline
// tools, as the agent loop does.
func runTools(t *testing.T, m abi.Message) abi.Message {
	t.Helper()
	tools := map[string]offline.Tool{}
	for _, tool := range offline.Tools(fixedNow) {
		tools[tool.Name] = tool
	}
	out := abi.Message{Role: abi.RoleTool}
	for _, c := range m.Contents {
		if c.Type != abi.ContentFunctionCall {
			continue
		}
		res := abi.Content{Type: abi.ContentFunctionResult, CallID: c.CallID}
		v, err := tools[c.Name].Func(context.Background(), c.Arguments)
		if err != nil {
			res.Error = err.Error()
		} else {
			res.Result, _ = json.Marshal(v)
		}
		out.Contents = append(out.Contents, res)
	}
	return out
}

func TestToolLoop(t *testing.T) {
	tests := []struct {
		name     string
		ask      string
		wantText string
	}{
		{name: "clock", ask: "What time is it?", wantText: "It is 12:34 (UTC) on Tuesday, 2 January 2024."},
		{name: "calculator", ask: "what is 2 + 3 * 4", wantText: "2 + 3 * 4 = 14."},
		{name: "both", ask: "what's the time and what is 2^10?", wantText: "It is 12:34 (UTC) on Tuesday, 2 January 2024. 2^10 = 1024."},
		{name: "tool error", ask: "what is 1/0", wantText: "The calculator tool failed: calculator: offline: invalid expression: division by zero."},
	}
	for _, tt := range tests {
		for _, streaming := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/complete", true: "/stream"}[streaming], func(t *testing.T) {
				history := []abi.Message{abi.NewMessage(abi.RoleSystem, "be helpful"), user(tt.ask)}
				var final abi.Message
				for iter := 0; iter < 3; iter++ {
					m, finish := call(t, streaming, model.Request{Messages: history, Tools: specs()})
					history = append(history, m)
					if len(m.CallIDs()) == 0 {
						require.Equal(t, "stop", finish, "finish without calls")
						final = m
						break
					}
					require.Equal(t, "tool_calls", finish, "finish with calls")
					history = append(history, runTools(t, m))
				}
				require.Equal(t, tt.wantText, final.TextContent())
				// The conversation must be one a strict OpenAI-compatible
				// service accepts when replayed.
				require.NoError(t, openaitest.ValidateHistory(history), "history rejected")
				require.Len(t, history, 5, "want system, user, call, result, answer")
			})
		}
	}
}

// call makes one model call and returns the message, aggregating a stream
// the way a consumer does.
func call(t *testing.T, streaming bool, req model.Request) (abi.Message, string) {
	t.Helper()
	if !streaming {
		res, err := offline.New().Complete(context.Background(), req)
		require.NoError(t, err)
		return res.Messages[0], res.FinishReason
	}
	var m abi.Message
	var text strings.Builder
	var finish string
	for u, err := range offline.New().Stream(context.Background(), req) {
		require.NoError(t, err)
		m.Role, m.MessageID = u.Role, u.MessageID
		for _, c := range u.Contents {
			if c.Type == abi.ContentText {
				text.WriteString(c.Text)
			} else {
				m.Contents = append(m.Contents, c)
			}
		}
		if u.FinishReason != "" {
			finish = u.FinishReason
		}
	}
	if text.Len() > 0 {
		m.Contents = append([]abi.Content{abi.Text(text.String())}, m.Contents...)
	}
	return m, finish
}

func TestStreamMatchesComplete(t *testing.T) {
	reqs := []model.Request{
		{Messages: []abi.Message{user("I like Italian food and my name is Ada")}},
		{Messages: []abi.Message{user("what time is it? and 6*7")}, Tools: specs()},
	}
	for i, req := range reqs {
		res, err := offline.New().Complete(context.Background(), req)
		require.NoError(t, err)
		m, finish := call(t, true, req)
		require.Equal(t, res.Messages[0], m, "request %d: stream message differs from complete", i)
		require.Equal(t, res.FinishReason, finish, "request %d: stream finish differs from complete", i)
	}
}

func TestDeterministic(t *testing.T) {
	req := model.Request{Messages: []abi.Message{user("what is 1+1 and what time is it")}, Tools: specs()}
	a, _ := offline.New().Complete(context.Background(), req)
	b, _ := offline.New().Complete(context.Background(), req)
	require.Equal(t, a, b, "same request, different responses")
	other, _ := offline.New().Complete(context.Background(), model.Request{Messages: []abi.Message{user("what is 1+2")}, Tools: specs()})
	require.NotEqual(t, a.Messages[0].MessageID, other.Messages[0].MessageID, "different requests share message ids")
	require.NotEqual(t, a.Messages[0].CallIDs()[0], other.Messages[0].CallIDs()[0], "different requests share call ids")
	ids := a.Messages[0].CallIDs()
	require.Len(t, ids, 2, "call ids")
	require.NotEqual(t, ids[0], ids[1], "call ids not distinct")
}

func TestErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		req    model.Request
		wantIs error
	}{
		{name: "conversation id", ctx: context.Background(), req: model.Request{Messages: []abi.Message{user("hi")}, ConversationID: "sentinel"}, wantIs: offline.ErrNoConversations},
		{name: "cancelled", ctx: cancelled, req: model.Request{Messages: []abi.Message{user("hi")}}, wantIs: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cerr := offline.New().Complete(tt.ctx, tt.req)
			assert.ErrorIs(t, cerr, tt.wantIs, "complete")
			var err error
			for _, e := range offline.New().Stream(tt.ctx, tt.req) {
				err = e
			}
			assert.ErrorIs(t, err, tt.wantIs)
		})
	}
}

func TestStreamEarlyStop(t *testing.T) {
	n := 0
	for range offline.New().Stream(context.Background(), model.Request{Messages: []abi.Message{user("tell me a story")}}) {
		n++
		break
	}
	require.Equal(t, 1, n, "updates after break")
}
