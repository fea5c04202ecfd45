package openai_test

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
	"github.com/wasmhist/wasmhist/host/agent/model/openai"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
)

var clockTool = model.ToolSpec{
	Name:        "clock",
	Description: "current time",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"tz":{"type":"string"}}}`),
}

func call(id, name, args string) abi.Content {
	return abi.Content{Type: abi.ContentFunctionCall, CallID: id, Name: name, Arguments: json.RawMessage(args)}
}

func result(id, res string) abi.Content {
	return abi.Content{Type: abi.ContentFunctionResult, CallID: id, Result: json.RawMessage(res)}
}

// toolHistory is a complete tool round: user, assistant call, tool result,
// assistant answer.
func toolHistory() []abi.Message {
	return []abi.Message{
		abi.NewMessage(abi.RoleSystem, "be brief"),
		abi.NewMessage(abi.RoleUser, "what time is it?"),
		{Role: abi.RoleAssistant, Contents: []abi.Content{abi.Text("checking"), call("c1", "clock", `{"tz":"UTC"}`), call("c2", "clock", `{}`)}},
		{Role: abi.RoleTool, Contents: []abi.Content{result("c2", `"13:00"`), result("c1", `{"time":"12:00"}`)}},
		abi.NewMessage(abi.RoleAssistant, "It is 12:00."),
		abi.NewMessage(abi.RoleUser, "thanks"),
	}
}

// collect aggregates a stream the way a consumer would: text deltas joined,
// calls appended.
func collect(t *testing.T, seq func(func(model.Update, error) bool)) (abi.Message, model.Update, error) {
	t.Helper()
	var msg abi.Message
	var last model.Update
	var text strings.Builder
	for u, err := range seq {
		if err != nil {
			return msg, last, err
		}
		if u.MessageID != "" {
			msg.MessageID = u.MessageID
		}
		if u.Role != "" {
			msg.Role = u.Role
		}
		for _, c := range u.Contents {
			if c.Type == abi.ContentText {
				text.WriteString(c.Text)
			} else {
				msg.Contents = append(msg.Contents, c)
			}
		}
		if u.FinishReason != "" {
			last.FinishReason = u.FinishReason
		}
		if u.ConversationID != "" {
			last.ConversationID = u.ConversationID
		}
		if u.Usage != nil {
			last.Usage = u.Usage
		}
	}
	if text.Len() > 0 {
		msg.Contents = append([]abi.Content{abi.Text(text.String())}, msg.Contents...)
	}
	return msg, last, nil
}

func newChat(s *openaitest.Server) *openai.Chat {
	return openai.NewChat(openai.Options{BaseURL: s.URL, APIKey: "sk-test", Model: "test-model"})
}

func TestChatComplete(t *testing.T) {
	tests := []struct {
		name       string
		reply      openaitest.Reply
		req        model.Request
		wantText   string
		wantCalls  []string
		wantFinish string
		check      func(t *testing.T, r openaitest.Request)
	}{
		{
			name:       "text, store unset is not sent",
			reply:      openaitest.Text("hello"),
			req:        model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "hi")}},
			wantText:   "hello",
			wantFinish: "stop",
			check: func(t *testing.T, r openaitest.Request) {
				assert.False(t, r.Has("store"), "store sent although unset: %s", r.Body)
				assert.False(t, r.Has("tools"), "tools sent although none given: %s", r.Body)
				assert.Equal(t, "Bearer sk-test", r.Header.Get("Authorization"))
				assert.Equal(t, "test-model", r.Chat.Model, "model")
			},
		},
		{
			name:     "store false is sent",
			reply:    openaitest.Text("x"),
			req:      model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "hi")}, Store: model.Bool(false)},
			wantText: "x", wantFinish: "stop",
			check: func(t *testing.T, r openaitest.Request) {
				v, _ := r.Field("store")
				assert.Equal(t, "false", string(v), "store")
			},
		},
		{
			name:     "store true is sent",
			reply:    openaitest.Text("x"),
			req:      model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "hi")}, Store: model.Bool(true)},
			wantText: "x", wantFinish: "stop",
			check: func(t *testing.T, r openaitest.Request) {
				v, _ := r.Field("store")
				assert.Equal(t, "true", string(v), "store")
			},
		},
		{
			name:  "tool calls",
			reply: openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{"tz":"UTC"}`}, openaitest.ToolCall{ID: "c2", Name: "clock"}),
			req: model.Request{
				Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "time?")},
				Tools:    []model.ToolSpec{clockTool},
			},
			wantCalls:  []string{"c1", "c2"},
			wantFinish: "tool_calls",
			check: func(t *testing.T, r openaitest.Request) {
				if assert.Len(t, r.Chat.Tools, 1, "tools not sent as given: %s", r.Body) {
					f := r.Chat.Tools[0].Function
					assert.Equal(t, "clock", f.Name, "tool name")
					assert.Contains(t, string(f.Parameters), `"tz"`, "tool parameters")
					assert.Equal(t, "current time", f.Description, "tool description")
				}
			},
		},
		{
			name:     "history with tool round",
			reply:    openaitest.Text("you're welcome"),
			req:      model.Request{Messages: toolHistory()},
			wantText: "you're welcome", wantFinish: "stop",
			check: func(t *testing.T, r openaitest.Request) {
				var roles []string
				for _, m := range r.Chat.Messages {
					roles = append(roles, m.Role)
				}
				assert.Equal(t, "system,user,assistant,tool,tool,assistant,user", strings.Join(roles, ","))
				a := r.Chat.Messages[2]
				assert.Equal(t, "checking", a.Text(), "assistant call message text")
				if assert.Len(t, a.ToolCalls, 2, "assistant call message calls") {
					assert.Equal(t, `{"tz":"UTC"}`, a.ToolCalls[0].Function.Arguments, "assistant call message arguments")
				}
				assert.Equal(t, "c2", r.Chat.Messages[3].ToolCallID, "first tool result")
				assert.Equal(t, "13:00", r.Chat.Messages[3].Text(), "string result sent unquoted")
				assert.Equal(t, `{"time":"12:00"}`, r.Chat.Messages[4].Text(), "object result sent as JSON")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openaitest.NewServer(t)
			s.RequireAPIKey("sk-test")
			s.Enqueue(tt.reply)
			res, err := newChat(s).Complete(context.Background(), tt.req)
			require.NoError(t, err)
			require.Len(t, res.Messages, 1)
			m := res.Messages[0]
			assert.Equal(t, abi.RoleAssistant, m.Role, "role")
			assert.NotEmpty(t, m.MessageID, "message id")
			assert.Equal(t, tt.wantText, m.TextContent())
			assert.Equal(t, strings.Join(tt.wantCalls, ","), strings.Join(m.CallIDs(), ","))
			assert.Equal(t, tt.wantFinish, res.FinishReason, "finish")
			assert.Empty(t, res.ConversationID, "conversation")
			if assert.NotNil(t, res.Usage, "usage") {
				assert.Equal(t, int64(15), res.Usage.TotalTokens, "usage")
			}
			tt.check(t, s.LastRequest())
		})
	}
}

func TestChatCallArguments(t *testing.T) {
	s := openaitest.NewServer(t)
	s.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{"tz":`}))
	res, err := newChat(s).Complete(context.Background(), model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "t")}})
	require.NoError(t, err)
	args := res.Messages[0].Contents[0].Arguments
	_, err = json.Marshal(res.Messages[0])
	require.NoError(t, err, "the message does not marshal")
	require.Equal(t, `"{\"tz\":"`, string(args), "broken arguments kept as a JSON string")
}

func TestChatErrors(t *testing.T) {
	orphan := []abi.Message{
		abi.NewMessage(abi.RoleUser, "time?"),
		{Role: abi.RoleAssistant, Contents: []abi.Content{call("c1", "clock", `{}`)}},
		abi.NewMessage(abi.RoleUser, "again"),
	}
	tests := []struct {
		name       string
		reply      *openaitest.Reply
		req        model.Request
		wantIs     error
		wantStatus int
		wantMsg    string
		wantSent   bool
	}{
		{name: "orphan tool call refused by the service", req: model.Request{Messages: orphan},
			wantStatus: 400, wantMsg: "did not have response messages: c1", wantSent: true},
		{name: "orphan tool result refused by the service", req: model.Request{Messages: []abi.Message{
			abi.NewMessage(abi.RoleUser, "u"), {Role: abi.RoleTool, Contents: []abi.Content{result("c9", `"x"`)}},
		}}, wantStatus: 400, wantMsg: "preceeding", wantSent: true},
		{name: "service error", reply: &openaitest.Reply{Err: &openaitest.APIError{Status: 429, Type: "rate_limit", Message: "slow down"}},
			req: model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "u")}}, wantStatus: 429, wantMsg: "slow down", wantSent: true},
		{name: "conversation id refused locally", req: model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "u")}, ConversationID: "local-sentinel"},
			wantIs: openai.ErrNoConversations},
		{name: "media refused locally", req: model.Request{Messages: []abi.Message{{Role: abi.RoleUser, Contents: []abi.Content{{Type: abi.ContentURI, URI: "http://x/y.png"}}}}},
			wantIs: openai.ErrUnsupportedContent},
	}
	for _, tt := range tests {
		for _, streaming := range []bool{false, true} {
			name := tt.name + map[bool]string{false: "/complete", true: "/stream"}[streaming]
			t.Run(name, func(t *testing.T) {
				s := openaitest.NewServer(t)
				if tt.reply != nil {
					s.Enqueue(*tt.reply)
				}
				c := newChat(s)
				var err error
				if streaming {
					_, _, err = collect(t, c.Stream(context.Background(), tt.req))
				} else {
					_, err = c.Complete(context.Background(), tt.req)
				}
				require.Error(t, err, "no error")
				if tt.wantIs != nil {
					require.ErrorIs(t, err, tt.wantIs)
				}
				if tt.wantStatus != 0 {
					var ae *openai.APIError
					require.ErrorAs(t, err, &ae)
					require.Equal(t, tt.wantStatus, ae.StatusCode, "status")
					require.ErrorContains(t, err, tt.wantMsg)
					require.ErrorContains(t, err, "chat completions", "the error names the operation")
				}
				require.Equal(t, tt.wantSent, len(s.Requests()) > 0, "request sent")
			})
		}
	}
}

func TestChatStream(t *testing.T) {
	s := openaitest.NewServer(t)
	s.Enqueue(openaitest.Reply{
		TextDeltas: []string{"Let me ", "check."},
		ToolCalls:  []openaitest.ToolCall{{ID: "c1", Name: "clock", Arguments: `{"tz":"UTC"}`}, {ID: "c2", Name: "clock", Arguments: `{}`}},
	})
	var deltas []string
	var callUpdates int
	seq := newChat(s).Stream(context.Background(), model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "t")}, Tools: []model.ToolSpec{clockTool}})
	for u, err := range seq {
		require.NoError(t, err)
		for _, c := range u.Contents {
			switch c.Type {
			case abi.ContentText:
				deltas = append(deltas, c.Text)
			case abi.ContentFunctionCall:
				callUpdates++
				assert.True(t, json.Valid(c.Arguments), "call not whole: %+v", c)
				assert.Equal(t, "clock", c.Name, "call not whole: %+v", c)
			}
		}
	}
	assert.Equal(t, []string{"Let me ", "check."}, deltas, "deltas")
	assert.Equal(t, 2, callUpdates, "calls")
	msg, last, err := collect(t, newChatReplay(t, s))
	require.NoError(t, err)
	assert.Equal(t, "Let me check.", msg.TextContent(), "aggregated text")
	if assert.Equal(t, "c1,c2", strings.Join(msg.CallIDs(), ","), "aggregated calls") {
		assert.Equal(t, `{"tz":"UTC"}`, string(msg.Contents[1].Arguments), "aggregated arguments")
	}
	assert.Equal(t, "tool_calls", last.FinishReason, "finish")
	if assert.NotNil(t, last.Usage, "usage") {
		assert.Equal(t, int64(15), last.Usage.TotalTokens, "usage")
	}
	r := s.LastRequest()
	assert.False(t, r.Has("store"), "store sent although unset: %s", r.Body)
	assert.True(t, r.Chat.Stream, "request not streamed: %s", r.Body)
}

// newChatReplay streams the same scripted reply again.
func newChatReplay(t *testing.T, s *openaitest.Server) func(func(model.Update, error) bool) {
	t.Helper()
	s.Enqueue(openaitest.Reply{
		TextDeltas: []string{"Let me ", "check."},
		ToolCalls:  []openaitest.ToolCall{{ID: "c1", Name: "clock", Arguments: `{"tz":"UTC"}`}, {ID: "c2", Name: "clock", Arguments: `{}`}},
	})
	return newChat(s).Stream(context.Background(), model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "t")}})
}

func TestStreamEarlyStopReleasesConnection(t *testing.T) {
	clients := map[string]func(s *openaitest.Server) model.Client{
		"chat":      func(s *openaitest.Server) model.Client { return newChat(s) },
		"responses": func(s *openaitest.Server) model.Client { return newResponses(s) },
	}
	for name, mk := range clients {
		t.Run(name, func(t *testing.T) {
			s := openaitest.NewServer(t)
			s.Enqueue(openaitest.Reply{TextDeltas: []string{"first ", "second"}, HoldOpen: true})
			var got []string
			for u, err := range mk(s).Stream(context.Background(), model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "t")}}) {
				require.NoError(t, err)
				if txt := u.Contents; len(txt) > 0 {
					got = append(got, txt[0].Text)
					break
				}
			}
			require.Equal(t, []string{"first "}, got)
			select {
			case <-s.Disconnected():
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the connection stayed open after the consumer stopped")
			}
		})
	}
}

func TestStreamCancelledContext(t *testing.T) {
	s := openaitest.NewServer(t)
	s.Enqueue(openaitest.Reply{TextDeltas: []string{"first "}, HoldOpen: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	for u, e := range newChat(s).Stream(ctx, model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "t")}}) {
		if e != nil {
			err = e
			break
		}
		if len(u.Contents) > 0 {
			cancel()
		}
	}
	require.ErrorIs(t, err, context.Canceled)
	<-s.Disconnected()
}
