package openai_test

import (
	"context"
	"errors"
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
	if !ok || !hs.StoresHistoryByDefault() {
		t.Fatal("Responses must report that it stores history by default")
	}
	if _, ok := model.Client(&openai.Chat{}).(model.HistoryStorer); ok {
		t.Fatal("Chat must not claim to store history")
	}
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
			if m.TextContent() != "Let me check." || strings.Join(m.CallIDs(), ",") != "c1" || string(m.Contents[1].Arguments) != `{"tz":"UTC"}` {
				t.Fatalf("turn 1 message %+v", m)
			}
			if r1.ConversationID == "" || !s.StoredResponse(r1.ConversationID) || r1.FinishReason != "tool_calls" {
				t.Fatalf("turn 1: conversation %q finish %q", r1.ConversationID, r1.FinishReason)
			}
			req1 := s.LastRequest()
			if req1.Has("store") || req1.Has("previous_response_id") {
				t.Fatalf("turn 1 sent unset fields: %s", req1.Body)
			}
			if tl := req1.Responses.Tools; len(tl) != 1 || tl[0].Name != "clock" || tl[0].Type != "function" {
				t.Fatalf("tools %s", req1.Body)
			}

			// Turn 2: only the tool result, continuing the conversation.
			r2, err := run(t, c, streaming, model.Request{
				Messages:       []abi.Message{{Role: abi.RoleTool, Contents: []abi.Content{result("c1", `"12:00"`)}}},
				ConversationID: r1.ConversationID,
			})
			require.NoError(t, err)
			if r2.Messages[0].TextContent() != "It is noon." || r2.ConversationID == r1.ConversationID || r2.FinishReason != "stop" {
				t.Fatalf("turn 2 %+v", r2)
			}
			req2 := s.LastRequest()
			if v, _ := req2.Field("previous_response_id"); string(v) != `"`+r1.ConversationID+`"` {
				t.Fatalf("previous_response_id %s", v)
			}
			items, _ := req2.Responses.Items()
			if len(items) != 1 || items[0].Type != "function_call_output" || items[0].CallID != "c1" || string(items[0].Output) != `"12:00"` {
				t.Fatalf("turn 2 input %s", req2.Responses.Input)
			}

			// Turn 3: not stored.
			r3, err := run(t, c, streaming, model.Request{
				Messages:       []abi.Message{abi.NewMessage(abi.RoleUser, "what did I ask?")},
				ConversationID: r2.ConversationID,
				Store:          model.Bool(false),
			})
			require.NoError(t, err)
			if r3.ConversationID != "" {
				t.Fatalf("unstored response returned conversation id %q", r3.ConversationID)
			}
			if v, _ := s.LastRequest().Field("store"); string(v) != "false" {
				t.Fatalf("store %s", v)
			}
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
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Fatalf("%v is not %v", err, tt.wantIs)
				}
				if tt.wantStatus != 0 {
					var ae *openai.APIError
					if !errors.As(err, &ae) || ae.StatusCode != tt.wantStatus || ae.Op != "responses" {
						t.Fatalf("error %v: want *APIError %d from responses", err, tt.wantStatus)
					}
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("error %q lacks %q", err, tt.wantMsg)
				}
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
			if r1.ConversationID != conv {
				t.Fatalf("conversation id %q, want %q", r1.ConversationID, conv)
			}
			req := s.LastRequest()
			if req.Has("previous_response_id") || req.Responses.ConversationID() != conv {
				t.Fatalf("request %s", req.Body)
			}
			// The service holds the call: sending only its result works.
			r2, err := run(t, c, streaming, model.Request{
				Messages:       []abi.Message{{Role: abi.RoleTool, Contents: []abi.Content{result("c1", `"12:00"`)}}},
				ConversationID: r1.ConversationID,
			})
			if err != nil || r2.Messages[0].TextContent() != "noon" || r2.ConversationID != conv {
				t.Fatalf("turn 2: %+v, %v", r2, err)
			}
		})
	}
}
