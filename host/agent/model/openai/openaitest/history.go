package openaitest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
)

// ValidateHistory checks that a history of abi messages, sent as chat
// completions messages, would be accepted by the service: it maps the
// messages the way an OpenAI-compatible client does (function_call parts
// become tool_calls of the assistant message, each function_result part
// becomes one tool message) and applies ValidateChatMessages. The error
// names the abi message at fault.
//
// Reasoning and usage parts are not sent and are ignored; a message with
// nothing left to send is skipped. An empty history is valid.
func ValidateHistory(msgs []abi.Message) error {
	chat, origin := chatFromABI(msgs)
	if len(chat) == 0 {
		return nil
	}
	err := ValidateChatMessages(chat)
	var ae *APIError
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	var i int
	if _, scanErr := fmt.Sscanf(ae.Param, "messages.[%d]", &i); scanErr == nil && i < len(origin) {
		return fmt.Errorf("history message %d (%s): %w", origin[i], msgs[origin[i]].Role, err)
	}
	return fmt.Errorf("history: %w", err)
}

// chatFromABI maps abi messages to chat messages and returns, for each chat
// message, the index of the abi message it came from.
func chatFromABI(msgs []abi.Message) ([]ChatMessage, []int) {
	var out []ChatMessage
	var origin []int
	add := func(m ChatMessage, i int) {
		out = append(out, m)
		origin = append(origin, i)
	}
	for i, m := range msgs {
		var text string
		var hasText, hasOther bool
		var calls []ChatToolCall
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentText:
				text += c.Text
				hasText = true
			case abi.ContentFunctionCall:
				tc := ChatToolCall{ID: c.CallID, Type: "function"}
				tc.Function.Name = c.Name
				tc.Function.Arguments = string(c.Arguments)
				calls = append(calls, tc)
			case abi.ContentFunctionResult:
				out := c.Error
				if out == "" {
					out = string(c.Result)
				}
				add(ChatMessage{Role: "tool", ToolCallID: c.CallID, Content: jsonString(out)}, i)
			case abi.ContentData, abi.ContentURI:
				hasOther = true
			}
		}
		switch {
		case m.Role == abi.RoleTool:
			if hasText && len(m.ResultIDs()) == 0 {
				// A tool message without a result part has no call id.
				add(ChatMessage{Role: "tool", Content: jsonString(text)}, i)
			}
		case m.Role == abi.RoleAssistant && (hasText || len(calls) > 0):
			cm := ChatMessage{Role: "assistant", ToolCalls: calls}
			if hasText {
				cm.Content = jsonString(text)
			}
			add(cm, i)
		case m.Role != abi.RoleAssistant && (hasText || hasOther):
			add(ChatMessage{Role: string(m.Role), Content: jsonString(text)}, i)
		}
	}
	return out, origin
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
