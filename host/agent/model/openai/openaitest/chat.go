package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
)

// ChatRequest is the part of a chat completions request body the fake reads.
type ChatRequest struct {
	Model         string        `json:"model"`
	Messages      []ChatMessage `json:"messages"`
	Tools         []ChatTool    `json:"tools,omitempty"`
	Stream        bool          `json:"stream,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	Store *bool `json:"store,omitempty"`
}

// ChatMessage is one message of a chat completions request.
type ChatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of content parts, or null.
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ChatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// Text returns the message's text: the string content, or its text parts
// joined.
func (m ChatMessage) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

func (m ChatMessage) hasContent() bool {
	c := strings.TrimSpace(string(m.Content))
	return c != "" && c != "null"
}

// ChatToolCall is one tool call of an assistant message.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatTool is one tool offered to the model.
type ChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidateChatMessages checks a chat completions message list against the
// service's rules: known roles, required fields, and tool ordering (an
// assistant message with tool_calls is followed by one tool message per
// call id, in any order, before the next non-tool message; a tool message
// answers a call of the preceding assistant message, once). It returns an
// *APIError like the one the service would answer with.
func ValidateChatMessages(msgs []ChatMessage) error {
	if len(msgs) == 0 {
		return invalid("messages", "[] is too short - 'messages'")
	}
	var pending map[string]bool
	pendingAt := -1
	for i, m := range msgs {
		param := fmt.Sprintf("messages.[%d]", i)
		if m.Role == "tool" {
			if m.ToolCallID == "" {
				return invalid(param+".tool_call_id", "Missing required parameter: '%s.tool_call_id'.", param)
			}
			if !m.hasContent() {
				return invalid(param+".content", "Missing required parameter: '%s.content'.", param)
			}
			if !pending[m.ToolCallID] {
				return invalid(param+".role", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (tool_call_id %q).", m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
			continue
		}
		if err := unanswered(pending, pendingAt); err != nil {
			return err
		}
		pending, pendingAt = nil, -1
		switch m.Role {
		case "system", "developer", "user":
			if !m.hasContent() {
				return invalid(param+".content", "Missing required parameter: '%s.content'.", param)
			}
		case "assistant":
			if !m.hasContent() && len(m.ToolCalls) == 0 {
				return invalid(param+".content", "Invalid value for 'content': expected a string, got null.")
			}
			if len(m.ToolCalls) > 0 {
				pending, pendingAt = map[string]bool{}, i
			}
			for j, c := range m.ToolCalls {
				cp := fmt.Sprintf("%s.tool_calls.[%d]", param, j)
				switch {
				case c.ID == "":
					return invalid(cp+".id", "Missing required parameter: '%s.id'.", cp)
				case c.Type != "function":
					return invalid(cp+".type", "Invalid value: '%s'. Supported values are: 'function'.", c.Type)
				case c.Function.Name == "":
					return invalid(cp+".function.name", "Missing required parameter: '%s.function.name'.", cp)
				case pending[c.ID]:
					return invalid(cp+".id", "Duplicate tool_call_id %q in one assistant message.", c.ID)
				}
				pending[c.ID] = true
			}
		default:
			return invalid(param+".role", "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', 'developer'.", m.Role)
		}
	}
	return unanswered(pending, pendingAt)
}

func unanswered(pending map[string]bool, at int) error {
	if len(pending) == 0 {
		return nil
	}
	ids := make([]string, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return invalid(fmt.Sprintf("messages.[%d].role", at),
		"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
		strings.Join(ids, ", "))
}

func validateChatRequest(cr *ChatRequest) error {
	if cr.Model == "" {
		return invalid("model", "you must provide a model parameter")
	}
	for i, t := range cr.Tools {
		if t.Type != "function" {
			return invalid(fmt.Sprintf("tools[%d].type", i), "Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)
		}
		if !toolName.MatchString(t.Function.Name) {
			return invalid(fmt.Sprintf("tools[%d].function.name", i), "Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
	}
	return ValidateChatMessages(cr.Messages)
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, rec Request) {
	cr := rec.Chat
	if cr == nil {
		writeError(w, invalid("", "We could not parse the JSON body of your request."))
		return
	}
	if err := validateChatRequest(cr); err != nil {
		writeError(w, err.(*APIError))
		return
	}
	rp := s.next(rec)
	if rp.Err != nil {
		writeError(w, rp.Err)
		return
	}
	id := s.nextID("chatcmpl-")
	calls := s.calls(rp)
	finish := rp.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	u := rp.usage()
	usage := map[string]any{
		"prompt_tokens":     u.InputTokens,
		"completion_tokens": u.OutputTokens,
		"total_tokens":      u.InputTokens + u.OutputTokens,
	}
	if !cr.Stream {
		msg := map[string]any{"role": "assistant", "content": nullable(rp.text()), "refusal": nil}
		if len(calls) > 0 {
			tcs := make([]map[string]any, len(calls))
			for i, c := range calls {
				tcs[i] = map[string]any{
					"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": c.Arguments},
				}
			}
			msg["tool_calls"] = tcs
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": createdAt, "model": cr.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
			"usage":   usage,
		})
		return
	}

	ev := newSSE(w)
	chunk := func(delta map[string]any, finish any) {
		ev.send("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": createdAt, "model": cr.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, d := range rp.deltas() {
		chunk(map[string]any{"content": d}, nil)
	}
	for i, c := range calls {
		// The real service sends the id and name first, then the arguments
		// in pieces; clients must join pieces by index.
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, nil)
		half := len(c.Arguments) / 2
		for _, piece := range []string{c.Arguments[:half], c.Arguments[half:]} {
			chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece},
			}}}, nil)
		}
	}
	if rp.HoldOpen {
		s.hold(r)
		return
	}
	chunk(map[string]any{}, finish)
	if cr.StreamOptions != nil && cr.StreamOptions.IncludeUsage {
		ev.send("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": createdAt, "model": cr.Model,
			"choices": []any{}, "usage": usage,
		})
	}
	ev.done()
}
