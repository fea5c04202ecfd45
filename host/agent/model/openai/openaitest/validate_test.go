package openaitest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

func msg(role, content string) ChatMessage {
	return ChatMessage{Role: role, Content: jsonString(content)}
}

func assistantCalls(ids ...string) ChatMessage {
	m := ChatMessage{Role: "assistant"}
	for _, id := range ids {
		tc := ChatToolCall{ID: id, Type: "function"}
		tc.Function.Name = "clock"
		tc.Function.Arguments = "{}"
		m.ToolCalls = append(m.ToolCalls, tc)
	}
	return m
}

func toolMsg(id string) ChatMessage {
	return ChatMessage{Role: "tool", ToolCallID: id, Content: jsonString("ok")}
}

func TestValidateChatMessages(t *testing.T) {
	tests := []struct {
		name    string
		msgs    []ChatMessage
		wantErr string // substring; empty means valid
	}{
		{name: "plain conversation", msgs: []ChatMessage{msg("system", "s"), msg("user", "hi"), msg("assistant", "hello"), msg("developer", "d")}},
		{name: "tool results in any order", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a", "b"), toolMsg("b"), toolMsg("a"), msg("assistant", "done")}},
		{name: "two tool rounds", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a"), toolMsg("a"), assistantCalls("b"), toolMsg("b")}},
		{name: "assistant with text and calls", msgs: func() []ChatMessage {
			m := assistantCalls("a")
			m.Content = jsonString("let me check")
			return []ChatMessage{msg("user", "u"), m, toolMsg("a")}
		}()},
		{name: "empty", msgs: nil, wantErr: "too short"},
		{name: "unknown role", msgs: []ChatMessage{msg("robot", "x")}, wantErr: "Invalid value: 'robot'"},
		{name: "tool without a call", msgs: []ChatMessage{msg("user", "u"), toolMsg("a")}, wantErr: "must be a response to a preceeding message with 'tool_calls'"},
		{name: "tool answering an unknown id", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a"), toolMsg("x")}, wantErr: "preceeding"},
		{name: "tool answering twice", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a"), toolMsg("a"), toolMsg("a")}, wantErr: "preceeding"},
		{name: "tool after a user message", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a"), toolMsg("a"), msg("user", "v"), toolMsg("a")}, wantErr: "preceeding"},
		{name: "missing one result", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a", "b"), toolMsg("a"), msg("user", "v")}, wantErr: "did not have response messages: b"},
		{name: "trailing unanswered calls", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a", "b")}, wantErr: "did not have response messages: a, b"},
		{name: "assistant without content or calls", msgs: []ChatMessage{msg("user", "u"), {Role: "assistant"}}, wantErr: "got null"},
		{name: "tool without id", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a"), {Role: "tool", Content: jsonString("x")}}, wantErr: "tool_call_id"},
		{name: "user without content", msgs: []ChatMessage{{Role: "user", Content: json.RawMessage("null")}}, wantErr: "content"},
		{name: "duplicate call id", msgs: []ChatMessage{msg("user", "u"), assistantCalls("a", "a"), toolMsg("a")}, wantErr: "Duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateChatMessages(tt.msgs)
			if tt.wantErr == "" {
				require.NoError(t, err, "want valid, got")
				return
			}
			var ae *APIError
			require.ErrorAs(t, err, &ae, "want a 400 *APIError")
			require.Equal(t, 400, ae.Status, "status")
			require.Equal(t, "invalid_request_error", ae.Type, "type")
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func call(id string) abi.Content {
	return abi.Content{Type: abi.ContentFunctionCall, CallID: id, Name: "clock", Arguments: json.RawMessage(`{}`)}
}

func result(id string) abi.Content {
	return abi.Content{Type: abi.ContentFunctionResult, CallID: id, Result: json.RawMessage(`"12:00"`)}
}

func TestValidateHistory(t *testing.T) {
	user := abi.NewMessage(abi.RoleUser, "what time is it?")
	tests := []struct {
		name    string
		msgs    []abi.Message
		wantErr string
	}{
		{name: "empty", msgs: nil},
		{name: "text only", msgs: []abi.Message{abi.NewMessage(abi.RoleSystem, "s"), user, abi.NewMessage(abi.RoleAssistant, "hi")}},
		{name: "call then results in one tool message", msgs: []abi.Message{
			user,
			{Role: abi.RoleAssistant, Contents: []abi.Content{call("a"), call("b")}},
			{Role: abi.RoleTool, Contents: []abi.Content{result("b"), result("a")}},
			abi.NewMessage(abi.RoleAssistant, "noon"),
		}},
		{name: "results split over tool messages", msgs: []abi.Message{
			user,
			{Role: abi.RoleAssistant, Contents: []abi.Content{abi.Text("checking"), call("a"), call("b")}},
			{Role: abi.RoleTool, Contents: []abi.Content{result("a")}},
			{Role: abi.RoleTool, Contents: []abi.Content{result("b")}},
		}},
		{name: "usage-only message is skipped", msgs: []abi.Message{
			user, {Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentUsage, Usage: &abi.Usage{TotalTokens: 3}}}},
		}},
		{name: "orphan call", msgs: []abi.Message{
			user,
			{Role: abi.RoleAssistant, Contents: []abi.Content{call("a")}},
			abi.NewMessage(abi.RoleUser, "again"),
		}, wantErr: "history message 1 (assistant)"},
		{name: "orphan result", msgs: []abi.Message{
			user,
			{Role: abi.RoleTool, Contents: []abi.Content{result("a")}},
		}, wantErr: "history message 1 (tool)"},
		{name: "tool message without a result part", msgs: []abi.Message{
			user,
			{Role: abi.RoleAssistant, Contents: []abi.Content{call("a")}},
			abi.NewMessage(abi.RoleTool, "12:00"),
		}, wantErr: "tool_call_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateHistory(tt.msgs)
			if tt.wantErr == "" {
				require.NoError(t, err, "want valid, got")
				return
			}
			var ae *APIError
			require.ErrorAs(t, err, &ae, "want an *APIError in the chain")
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}
