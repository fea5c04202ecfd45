// Package model defines what the agent loop needs of a language-model
// service: one non-streaming call, one streaming call, and the options that
// travel with them. Clients for OpenAI-compatible services and the offline
// model live in subpackages.
package model

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/wasmhist/wasmhist/abi"
)

// Client is a model service.
//
// Implementations must not keep the context and must be safe for concurrent
// use. A call's Request.Messages are what the service should see for this
// call; when Request.ConversationID is set the service already holds the
// earlier conversation and Messages are only the new ones.
type Client interface {
	Complete(ctx context.Context, req Request) (*Response, error)
	// Stream yields updates as they arrive; a non-nil error ends the stream.
	Stream(ctx context.Context, req Request) iter.Seq2[Update, error]
}

// HistoryStorer is implemented by clients whose service keeps the
// conversation itself when Request.Store is unset (for example the OpenAI
// Responses API, which stores by default).
type HistoryStorer interface {
	StoresHistoryByDefault() bool
}

// Request is one model call.
type Request struct {
	// Instructions, when set, is the system prompt of this call. It is not
	// part of the conversation: a service that keeps the conversation does
	// not carry it from one call to the next, so it is sent on every call.
	// A client whose API has no such parameter sends it as a leading system
	// message (see MessagesWithInstructions).
	Instructions string
	Messages     []abi.Message
	Tools        []ToolSpec
	// ConversationID continues a service-managed conversation.
	ConversationID string
	// Store asks the service to keep (true) or not keep (false) the
	// conversation. Nil means unset: the client must not send the field at
	// all, so the service applies its own default.
	Store *bool
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the tool's arguments object.
	Parameters json.RawMessage
}

// Response is a completed model call.
type Response struct {
	// Messages the model produced (usually one assistant message, whose
	// function_call parts ask for tools).
	Messages []abi.Message
	// ConversationID is set when the service keeps the conversation and
	// returned an id to continue it.
	ConversationID string
	Usage          *abi.Usage
	FinishReason   string
}

// Update is one piece of a streamed response. Text and reasoning parts are
// deltas to append; function_call parts arrive whole. An update with a
// different MessageID than the previous one starts a new message.
type Update struct {
	MessageID      string
	Role           abi.Role
	Contents       []abi.Content
	ConversationID string
	Usage          *abi.Usage
	FinishReason   string
}

// Bool returns a pointer to b, for Request.Store.
func Bool(b bool) *bool { return &b }

// MessagesWithInstructions returns req.Messages preceded by
// req.Instructions as a system message, when set: what a service that has
// no separate instructions parameter should be sent.
func MessagesWithInstructions(req Request) []abi.Message {
	if req.Instructions == "" {
		return req.Messages
	}
	out := make([]abi.Message, 0, len(req.Messages)+1)
	out = append(out, abi.NewMessage(abi.RoleSystem, req.Instructions))
	return append(out, req.Messages...)
}
