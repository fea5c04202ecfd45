package openaitest

import (
	"fmt"
	"net/http"
)

// Reply is one scripted answer of the fake server.
//
// A reply with Err set answers with that error; otherwise the model answers
// with Text and ToolCalls (either may be empty).
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	// Usage is reported as-is; nil reports a small fixed usage.
	Usage *Usage
	// FinishReason overrides the chat finish_reason ("stop", or
	// "tool_calls" when ToolCalls is set).
	FinishReason string

	// TextDeltas, when streaming, splits the text into exactly these
	// deltas (their concatenation replaces Text). By default the text is
	// split after each space.
	TextDeltas []string
	// HoldOpen, when streaming, keeps the response open after the last
	// delta, without the terminating events, until the client goes away.
	// Server.Disconnected then reports that the client closed it.
	HoldOpen bool

	Err *APIError
}

// ToolCall is a function call the model asks for. An empty ID is filled in
// with call_<n>.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Text returns a reply with the given text.
func Text(s string) Reply { return Reply{Text: s} }

// Calls returns a reply that asks for the given tool calls.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Fail returns a reply that answers with an HTTP error.
func Fail(status int, message string) Reply {
	t := "invalid_request_error"
	if status >= 500 {
		t = "server_error"
	}
	return Reply{Err: &APIError{Status: status, Type: t, Message: message}}
}

// APIError is an OpenAI-style error: the fake's answer to a broken rule, and
// what the validators return.
type APIError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
}

func (e *APIError) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("openaitest: %d %s (param %s)", e.Status, e.Message, e.Param)
	}
	return fmt.Sprintf("openaitest: %d %s", e.Status, e.Message)
}

// invalid returns a 400 invalid_request_error.
func invalid(param, format string, args ...any) *APIError {
	return &APIError{
		Status:  http.StatusBadRequest,
		Type:    "invalid_request_error",
		Param:   param,
		Message: fmt.Sprintf(format, args...),
	}
}
