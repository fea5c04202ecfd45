package openai

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
)

const opResponses = "responses"

// Responses is a model.Client for the Responses API. The service stores
// responses unless told not to, so a call's response id continues the
// conversation. It is safe for concurrent use.
type Responses struct {
	svc   responses.ResponseService
	model string
}

var (
	_ model.Client        = (*Responses)(nil)
	_ model.HistoryStorer = (*Responses)(nil)
)

// NewResponses returns a Responses API client.
func NewResponses(o Options) *Responses {
	return &Responses{svc: responses.NewResponseService(o.requestOptions()...), model: o.model()}
}

// StoresHistoryByDefault reports true: the Responses API keeps a response
// (and the input that led to it) unless store is false.
func (r *Responses) StoresHistoryByDefault() bool { return true }

// Complete makes one non-streaming call.
func (r *Responses) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	params, err := r.params(req)
	if err != nil {
		return nil, err
	}
	res, err := r.svc.New(ctx, params)
	if err != nil {
		return nil, apiError(opResponses, err)
	}
	if err := failed(res); err != nil {
		return nil, err
	}
	msg := abi.Message{Role: abi.RoleAssistant, MessageID: res.ID, Contents: []abi.Content{}}
	for _, item := range res.Output {
		switch item.Type {
		case "message":
			for _, c := range item.Content {
				if c.Type == "output_text" && c.Text != "" {
					msg.Contents = append(msg.Contents, abi.Text(c.Text))
				}
			}
		case "function_call":
			msg.Contents = append(msg.Contents, functionCall(item))
		}
	}
	return &model.Response{
		Messages:       []abi.Message{msg},
		ConversationID: conversationID(req, res),
		Usage:          usage(res.Usage.InputTokens, res.Usage.OutputTokens, res.Usage.TotalTokens),
		FinishReason:   finishReason(res, msg),
	}, nil
}

// Stream makes one streaming call. Text arrives as deltas; each function
// call is yielded whole when its output item is done; the last update
// carries the conversation id, the usage and the finish reason.
func (r *Responses) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		params, err := r.params(req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		stream := r.svc.NewStreaming(ctx, params)
		defer stream.Close()
		var id string
		for stream.Next() {
			ev := stream.Current()
			var u *model.Update
			switch ev.Type {
			case "response.created", "response.in_progress":
				id = ev.Response.ID
			case "response.output_text.delta":
				u = &model.Update{Contents: []abi.Content{abi.Text(ev.Delta)}}
			case "response.reasoning_summary_text.delta":
				u = &model.Update{Contents: []abi.Content{{Type: abi.ContentReasoning, Text: ev.Delta}}}
			case "response.output_item.done":
				if ev.Item.Type == "function_call" {
					u = &model.Update{Contents: []abi.Content{functionCall(ev.Item)}}
				}
			case "response.completed", "response.incomplete":
				res := ev.Response
				id = res.ID
				u = &model.Update{
					ConversationID: conversationID(req, &res),
					Usage:          usage(res.Usage.InputTokens, res.Usage.OutputTokens, res.Usage.TotalTokens),
					FinishReason:   finishReason(&res, calls(res.Output)),
				}
			case "response.failed":
				yield(model.Update{}, failed(&ev.Response))
				return
			case "error":
				yield(model.Update{}, &APIError{Op: opResponses, Code: ev.Code, Param: ev.Param, Message: ev.Message})
				return
			}
			if u == nil {
				continue
			}
			u.MessageID, u.Role = id, abi.RoleAssistant
			if !yield(*u, nil) {
				return
			}
		}
		if err := stream.Err(); err != nil {
			yield(model.Update{}, apiError(opResponses, err))
		}
	}
}

func functionCall(item responses.ResponseOutputItemUnion) abi.Content {
	return abi.Content{
		Type: abi.ContentFunctionCall, CallID: item.CallID, Name: item.Name,
		Arguments: callArguments(item.Arguments.OfString),
	}
}

// calls returns a message holding the output's function calls, for
// finishReason.
func calls(output []responses.ResponseOutputItemUnion) abi.Message {
	var m abi.Message
	for _, item := range output {
		if item.Type == "function_call" {
			m.Contents = append(m.Contents, functionCall(item))
		}
	}
	return m
}

// conversationID is what continues the conversation: a Conversations API
// id stays the same; otherwise it is the response id, when the service kept
// the response (only a stored response can be continued).
func conversationID(req model.Request, res *responses.Response) string {
	if isConversation(req.ConversationID) {
		return req.ConversationID
	}
	if req.Store != nil && !*req.Store {
		return ""
	}
	return res.ID
}

// isConversation tells a Conversations API id (conv_...) from a response id
// (resp_...): the service names its ids by kind, and the two continue a
// conversation through different fields.
func isConversation(id string) bool { return strings.HasPrefix(id, "conv_") }

// finishReason names why the response ended in Chat Completions terms, so
// callers see the same reasons from both clients.
func finishReason(res *responses.Response, msg abi.Message) string {
	switch {
	case res.Status == "incomplete" && res.IncompleteDetails.Reason == "max_output_tokens":
		return "length"
	case res.Status == "incomplete" && res.IncompleteDetails.Reason == "content_filter":
		return "content_filter"
	case len(msg.CallIDs()) > 0:
		return "tool_calls"
	}
	return "stop"
}

func failed(res *responses.Response) error {
	if res.Status != "failed" {
		return nil
	}
	e := &APIError{Op: opResponses, Code: string(res.Error.Code), Message: res.Error.Message}
	if e.Message == "" {
		e.Message = "response failed"
	}
	return e
}

func (r *Responses) params(req model.Request) (responses.ResponseNewParams, error) {
	var p responses.ResponseNewParams
	items, err := inputItems(req.Messages)
	if err != nil {
		return p, err
	}
	if len(items) == 0 && req.ConversationID == "" {
		return p, errors.New("openai: responses: nothing to send: no messages and no conversation id")
	}
	p.Model = r.model
	if req.Instructions != "" {
		// Not inherited through previous_response_id: sent on every call,
		// it never accumulates in the stored conversation.
		p.Instructions = param.NewOpt(req.Instructions)
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	switch {
	case isConversation(req.ConversationID):
		p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: param.NewOpt(req.ConversationID)}
	case req.ConversationID != "":
		p.PreviousResponseID = param.NewOpt(req.ConversationID)
	}
	if req.Store != nil {
		p.Store = param.NewOpt(*req.Store)
	}
	for _, t := range req.Tools {
		params, err := toolParameters(t.Name, t.Parameters)
		if err != nil {
			return p, err
		}
		// Strict mode would demand every property be required and
		// additionalProperties false; tool schemas are not written for it.
		tool := responses.ToolParamOfFunction(t.Name, params, false)
		if t.Description != "" {
			tool.OfFunction.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, tool)
	}
	return p, nil
}

// inputItems maps abi messages to Responses input items; see the package
// documentation.
func inputItems(msgs []abi.Message) (responses.ResponseInputParam, error) {
	var out responses.ResponseInputParam
	for i, m := range msgs {
		if err := checkContent(i, m); err != nil {
			return nil, err
		}
		var role responses.EasyInputMessageRole
		switch m.Role {
		case abi.RoleSystem:
			role = responses.EasyInputMessageRoleSystem
		case abi.RoleUser:
			role = responses.EasyInputMessageRoleUser
		case abi.RoleAssistant:
			role = responses.EasyInputMessageRoleAssistant
		case abi.RoleTool:
		default:
			return nil, fmt.Errorf("openai: message %d: unknown role %q", i, m.Role)
		}
		// Text first, then calls and results, in part order: the service
		// expects an assistant's words before the calls they announce.
		if text := m.TextContent(); role != "" && hasText(m) {
			out = append(out, responses.ResponseInputItemParamOfMessage(text, role))
		}
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentFunctionCall:
				out = append(out, responses.ResponseInputItemParamOfFunctionCall(string(c.Arguments), c.CallID, c.Name))
			case abi.ContentFunctionResult:
				item := responses.ResponseInputItemParamOfFunctionCallOutput(resultOutput(c))
				item.OfFunctionCallOutput.CallID = param.NewOpt(c.CallID)
				out = append(out, item)
			}
		}
	}
	return out, nil
}

func hasText(m abi.Message) bool {
	for _, c := range m.Contents {
		if c.Type == abi.ContentText {
			return true
		}
	}
	return false
}
