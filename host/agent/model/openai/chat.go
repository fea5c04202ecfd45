package openai

import (
	"context"
	"fmt"
	"iter"
	"sort"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
)

const opChat = "chat completions"

// Chat is a model.Client for the Chat Completions API. It is safe for
// concurrent use.
type Chat struct {
	svc   openai.ChatCompletionService
	model string
}

var _ model.Client = (*Chat)(nil)

// NewChat returns a Chat Completions client.
func NewChat(o Options) *Chat {
	return &Chat{svc: openai.NewChatCompletionService(o.requestOptions()...), model: o.model()}
}

// Complete makes one non-streaming call.
func (c *Chat) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	params, err := c.params(req)
	if err != nil {
		return nil, err
	}
	res, err := c.svc.New(ctx, params)
	if err != nil {
		return nil, apiError(opChat, err)
	}
	out := &model.Response{}
	if res.Usage.TotalTokens != 0 || res.Usage.PromptTokens != 0 {
		out.Usage = usage(res.Usage.PromptTokens, res.Usage.CompletionTokens, res.Usage.TotalTokens)
	}
	if len(res.Choices) == 0 {
		return out, nil
	}
	ch := res.Choices[0]
	out.FinishReason = ch.FinishReason
	msg := abi.Message{Role: abi.RoleAssistant, MessageID: res.ID, Contents: []abi.Content{}}
	if ch.Message.Content != "" {
		msg.Contents = append(msg.Contents, abi.Text(ch.Message.Content))
	}
	for _, tc := range ch.Message.ToolCalls {
		msg.Contents = append(msg.Contents, abi.Content{
			Type: abi.ContentFunctionCall, CallID: tc.ID, Name: tc.Function.Name,
			Arguments: callArguments(tc.Function.Arguments),
		})
	}
	out.Messages = []abi.Message{msg}
	return out, nil
}

// Stream makes one streaming call. Text arrives as deltas; each tool call
// is yielded whole once the stream says the choice is finished.
func (c *Chat) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		params, err := c.params(req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
		stream := c.svc.NewStreaming(ctx, params)
		defer stream.Close()

		type partial struct {
			id, name, args string
		}
		calls := map[int64]*partial{}
		var id string
		flushCalls := func(finish string) bool {
			if len(calls) == 0 && finish == "" {
				return true
			}
			idx := make([]int64, 0, len(calls))
			for i := range calls {
				idx = append(idx, i)
			}
			sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
			u := model.Update{MessageID: id, Role: abi.RoleAssistant, FinishReason: finish}
			for _, i := range idx {
				p := calls[i]
				u.Contents = append(u.Contents, abi.Content{
					Type: abi.ContentFunctionCall, CallID: p.id, Name: p.name, Arguments: callArguments(p.args),
				})
			}
			calls = map[int64]*partial{}
			return yield(u, nil)
		}
		for stream.Next() {
			chunk := stream.Current()
			if chunk.ID != "" {
				id = chunk.ID
			}
			for _, ch := range chunk.Choices {
				if ch.Index != 0 {
					continue
				}
				if d := ch.Delta.Content; d != "" {
					if !yield(model.Update{MessageID: id, Role: abi.RoleAssistant, Contents: []abi.Content{abi.Text(d)}}, nil) {
						return
					}
				}
				for _, tc := range ch.Delta.ToolCalls {
					p := calls[tc.Index]
					if p == nil {
						p = &partial{}
						calls[tc.Index] = p
					}
					if tc.ID != "" {
						p.id = tc.ID
					}
					if tc.Function.Name != "" {
						p.name = tc.Function.Name
					}
					p.args += tc.Function.Arguments
				}
				if ch.FinishReason != "" && !flushCalls(ch.FinishReason) {
					return
				}
			}
			if chunk.JSON.Usage.Valid() && (chunk.Usage.TotalTokens != 0 || chunk.Usage.PromptTokens != 0) {
				u := usage(chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens, chunk.Usage.TotalTokens)
				if !yield(model.Update{MessageID: id, Role: abi.RoleAssistant, Usage: u}, nil) {
					return
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield(model.Update{}, apiError(opChat, err))
			return
		}
		// A server that ends the stream without a finish_reason still
		// delivered its calls.
		flushCalls("")
	}
}

func (c *Chat) params(req model.Request) (openai.ChatCompletionNewParams, error) {
	var p openai.ChatCompletionNewParams
	if req.ConversationID != "" {
		return p, ErrNoConversations
	}
	msgs, err := ChatMessages(model.MessagesWithInstructions(req))
	if err != nil {
		return p, err
	}
	p.Model = c.model
	p.Messages = msgs
	if req.Store != nil {
		p.Store = param.NewOpt(*req.Store)
	}
	for _, t := range req.Tools {
		params, err := toolParameters(t.Name, t.Parameters)
		if err != nil {
			return p, err
		}
		fd := openai.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return p, nil
}

// ChatMessages maps abi messages to Chat Completions messages, as Chat
// sends them (see the package documentation); FromChatMessage maps one
// back. It is the one mapping both the client and an export to another
// framework use.
func ChatMessages(msgs []abi.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	var out []openai.ChatCompletionMessageParamUnion
	for i, m := range msgs {
		if err := checkContent(i, m); err != nil {
			return nil, err
		}
		var calls []openai.ChatCompletionMessageToolCallUnionParam
		var hasText bool
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentText:
				hasText = true
			case abi.ContentFunctionResult:
				out = append(out, openai.ToolMessage(resultOutput(c), c.CallID))
			case abi.ContentFunctionCall:
				calls = append(calls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: c.CallID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name: c.Name, Arguments: string(c.Arguments),
						},
					},
				})
			}
		}
		text := m.TextContent()
		switch m.Role {
		case abi.RoleSystem:
			if hasText {
				out = append(out, openai.SystemMessage(text))
			}
		case abi.RoleUser:
			if hasText {
				out = append(out, openai.UserMessage(text))
			}
		case abi.RoleAssistant:
			if !hasText && len(calls) == 0 {
				continue
			}
			am := openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}
			if hasText {
				am.Content.OfString = param.NewOpt(text)
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &am})
		case abi.RoleTool:
			// Tool messages are the function_result parts above.
		default:
			return nil, fmt.Errorf("openai: message %d: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}
