package openai_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/openai"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
)

func newResponses(s *openaitest.Server) *openai.Responses {
	return openai.NewResponses(openai.Options{BaseURL: s.URL, Model: "test-model"})
}

// call runs one request through Complete or Stream and returns the same
// shape either way.
func run(t *testing.T, c model.Client, streaming bool, req model.Request) (*model.Response, error) {
	t.Helper()
	if !streaming {
		return c.Complete(context.Background(), req)
	}
	msg, last, err := collect(t, c.Stream(context.Background(), req))
	if err != nil {
		return nil, err
	}
	return &model.Response{Messages: []abi.Message{msg}, ConversationID: last.ConversationID, Usage: last.Usage, FinishReason: last.FinishReason}, nil
}

func TestResponsesStoresByDefault(t *testing.T) {
	var c model.Client = newResponses(openaitest.NewServer(t))
	hs, ok := c.(model.HistoryStorer)
	require.True(t, ok, "Responses must implement HistoryStorer")
	require.True(t, hs.StoresHistoryByDefault(), "Responses must report that it stores history by default")
	_, ok = model.Client(&openai.Chat{}).(model.HistoryStorer)
	require.False(t, ok, "Chat must not claim to store history")
}

func TestResponsesConversation(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "complete", true: "stream"}[streaming], func(t *testing.T) {
			s := openaitest.NewServer(t)
			c := newResponses(s)
			s.Enqueue(
				openaitest.Reply{Text: "Let me check.", ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "clock", Arguments: `{"tz":"UTC"}`}}},
				openaitest.Text("It is noon."),
				openaitest.Text("You asked for the time."),
			)
			// Turn 1: a tool call; the service keeps the response.
			r1, err := run(t, c, streaming, model.Request{
				Messages: []abi.Message{abi.NewMessage(abi.RoleSystem, "be brief"), abi.NewMessage(abi.RoleUser, "time?")},
				Tools:    []model.ToolSpec{clockTool},
			})
			require.NoError(t, err)
			m := r1.Messages[0]
			require.Equal(t, "Let me check.", m.TextContent(), "turn 1 text")
			require.Equal(t, "c1", strings.Join(m.CallIDs(), ","), "turn 1 calls")
			require.Equal(t, `{"tz":"UTC"}`, string(m.Contents[1].Arguments), "turn 1 arguments")
			require.NotEmpty(t, r1.ConversationID, "turn 1 conversation")
			require.True(t, s.StoredResponse(r1.ConversationID), "turn 1 response not stored")
			require.Equal(t, "tool_calls", r1.FinishReason, "turn 1 finish")
			req1 := s.LastRequest()
			require.False(t, req1.Has("store"), "turn 1 sent unset store: %s", req1.Body)
			require.False(t, req1.Has("previous_response_id"), "turn 1 sent unset previous_response_id: %s", req1.Body)
			tl := req1.Responses.Tools
			require.Len(t, tl, 1, "tools %s", req1.Body)
			require.Equal(t, "clock", tl[0].Name, "tool name")
			require.Equal(t, "function", tl[0].Type, "tool type")

			// Turn 2: only the tool result, continuing the conversation.
			r2, err := run(t, c, streaming, model.Request{
				Messages:       []abi.Message{{Role: abi.RoleTool, Contents: []abi.Content{result("c1", `"12:00"`)}}},
				ConversationID: r1.ConversationID,
			})
			require.NoError(t, err)
			require.Equal(t, "It is noon.", r2.Messages[0].TextContent(), "turn 2 text")
			require.NotEqual(t, r1.ConversationID, r2.ConversationID, "turn 2 conversation")
			require.Equal(t, "stop", r2.FinishReason, "turn 2 finish")
			req2 := s.LastRequest()
			prev, _ := req2.Field("previous_response_id")
			require.Equal(t, `"`+r1.ConversationID+`"`, string(prev), "previous_response_id")
			items, _ := req2.Responses.Items()
			require.Len(t, items, 1, "turn 2 input %s", req2.Responses.Input)
			require.Equal(t, "function_call_output", items[0].Type, "turn 2 input type")
			require.Equal(t, "c1", items[0].CallID, "turn 2 input call")
			require.Equal(t, `"12:00"`, string(items[0].Output), "turn 2 input output")

			// Turn 3: not stored.
			r3, err := run(t, c, streaming, model.Request{
				Messages:       []abi.Message{abi.NewMessage(abi.RoleUser, "what did I ask?")},
				ConversationID: r2.ConversationID,
				Store:          model.Bool(false),
			})
			require.NoError(t, err)
			require.Empty(t, r3.ConversationID, "unstored response returned a conversation id")
			store, _ := s.LastRequest().Field("store")
			require.Equal(t, "false", string(store), "store")
		})
	}
}

func TestResponsesFullHistoryStateless(t *testing.T) {
	s := openaitest.NewServer(t)
	s.Enqueue(openaitest.Text("ok"))
	_, err := newResponses(s).Complete(context.Background(), model.Request{Messages: toolHistory(), Store: model.Bool(false)})
	require.NoError(t, err)
	items, _ := s.LastRequest().Responses.Items()
	var kinds []string
	for _, it := range items {
		k := it.Type
		if it.Role != "" {
			k = "message:" + it.Role // type is optional on message items
		}
		kinds = append(kinds, k)
	}
	want := "message:system,message:user,message:assistant,function_call,function_call,function_call_output,function_call_output,message:assistant,message:user"
	require.Equal(t, want, strings.Join(kinds, ","))
}

func TestResponsesErrors(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(s *openaitest.Server) model.Request
		wantIs     error
		wantStatus int
		wantMsg    string
	}{
		{
			name: "unknown previous response",
			setup: func(s *openaitest.Server) model.Request {
				return model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "u")}, ConversationID: "resp_unknown"}
			},
			wantIs: openai.ErrConversationNotFound, wantStatus: 400, wantMsg: "resp_unknown",
		},
		{
			name: "unknown conversation",
			setup: func(s *openaitest.Server) model.Request {
				return model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "u")}, ConversationID: "conv_unknown"}
			},
			wantIs: openai.ErrConversationNotFound, wantStatus: 404, wantMsg: "conv_unknown",
		},
		{
			name: "output for an unknown call",
			setup: func(s *openaitest.Server) model.Request {
				return model.Request{Messages: []abi.Message{
					abi.NewMessage(abi.RoleUser, "u"), {Role: abi.RoleTool, Contents: []abi.Content{result("c9", `"x"`)}},
				}}
			},
			wantStatus: 400, wantMsg: "No tool call found for function call output with call_id c9",
		},
		{
			name: "continuation leaves a call unanswered",
			setup: func(s *openaitest.Server) model.Request {
				s.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock"}))
				r, err := newResponses(s).Complete(context.Background(), model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "t")}})
				require.NoError(t, err)
				return model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "never mind")}, ConversationID: r.ConversationID}
			},
			wantStatus: 400, wantMsg: "No tool output found for function call c1",
		},
		{
			name: "nothing to send",
			setup: func(s *openaitest.Server) model.Request {
				return model.Request{}
			},
			wantMsg: "nothing to send",
		},
		{
			name: "server error",
			setup: func(s *openaitest.Server) model.Request {
				s.Enqueue(openaitest.Fail(503, "overloaded"))
				return model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "u")}}
			},
			wantStatus: 503, wantMsg: "overloaded",
		},
	}
	for _, tt := range tests {
		for _, streaming := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "/complete", true: "/stream"}[streaming], func(t *testing.T) {
				s := openaitest.NewServer(t)
				req := tt.setup(s)
				_, err := run(t, newResponses(s), streaming, req)
				require.Error(t, err, "no error")
				if tt.wantIs != nil {
					require.ErrorIs(t, err, tt.wantIs)
				}
				if tt.wantStatus != 0 {
					var ae *openai.APIError
					require.ErrorAs(t, err, &ae)
					require.Equal(t, tt.wantStatus, ae.StatusCode, "status")
					require.Equal(t, "responses", ae.Op, "operation")
				}
				require.ErrorContains(t, err, tt.wantMsg)
			})
		}
	}
}

func TestResponsesConversationsAPI(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "complete", true: "stream"}[streaming], func(t *testing.T) {
			s := openaitest.NewServer(t)
			conv := s.CreateConversation()
			c := newResponses(s)
			s.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock"}), openaitest.Text("noon"))
			r1, err := run(t, c, streaming, model.Request{Messages: []abi.Message{abi.NewMessage(abi.RoleUser, "time?")}, ConversationID: conv})
			require.NoError(t, err)
			require.Equal(t, conv, r1.ConversationID, "conversation id")
			req := s.LastRequest()
			require.False(t, req.Has("previous_response_id"), "request %s", req.Body)
			require.Equal(t, conv, req.Responses.ConversationID(), "request %s", req.Body)
			// The service holds the call: sending only its result works.
			r2, err := run(t, c, streaming, model.Request{
				Messages:       []abi.Message{{Role: abi.RoleTool, Contents: []abi.Content{result("c1", `"12:00"`)}}},
				ConversationID: r1.ConversationID,
			})
			require.NoError(t, err, "turn 2")
			require.Equal(t, "noon", r2.Messages[0].TextContent(), "turn 2 text")
			require.Equal(t, conv, r2.ConversationID, "turn 2 conversation")
		})
	}
}
