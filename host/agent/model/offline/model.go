package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
)

// Name is the model name the offline model reports.
const Name = "offline"

// ErrNoConversations is returned for a request with a ConversationID: the
// offline model keeps nothing between calls, so an id reaching it means a
// caller-local id leaked or history was wrongly left out.
var ErrNoConversations = errors.New("offline: the offline model keeps no conversation; send the history instead")

// Model is the offline model. The zero value is ready to use; it is
// stateless and safe for concurrent use.
type Model struct{}

var _ model.Client = Model{}

// New returns the offline model.
func New() Model { return Model{} }

// Complete answers one request.
func (Model) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	if err := check(ctx, req); err != nil {
		return nil, err
	}
	req = withInstructions(req)
	t := answer(req)
	id := messageID(req)
	msg := abi.Message{Role: abi.RoleAssistant, MessageID: id, Contents: []abi.Content{}}
	if t.text != "" {
		msg.Contents = append(msg.Contents, abi.Text(t.text))
	}
	msg.Contents = append(msg.Contents, t.callContents(id)...)
	return &model.Response{
		Messages:     []abi.Message{msg},
		Usage:        t.usage(req),
		FinishReason: t.finishReason(),
	}, nil
}

// Stream answers one request as a stream: the text word by word, then the
// tool calls, then the finish reason and usage.
func (Model) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		if err := check(ctx, req); err != nil {
			yield(model.Update{}, err)
			return
		}
		req = withInstructions(req)
		t := answer(req)
		id := messageID(req)
		var updates []model.Update
		for _, w := range words(t.text) {
			updates = append(updates, model.Update{Contents: []abi.Content{abi.Text(w)}})
		}
		if calls := t.callContents(id); len(calls) > 0 {
			updates = append(updates, model.Update{Contents: calls})
		}
		updates = append(updates, model.Update{Usage: t.usage(req), FinishReason: t.finishReason()})
		for _, u := range updates {
			if err := ctx.Err(); err != nil {
				yield(model.Update{}, fmt.Errorf("offline: %w", err))
				return
			}
			u.MessageID, u.Role = id, abi.RoleAssistant
			if !yield(u, nil) {
				return
			}
		}
	}
}

// withInstructions folds the instructions into the messages as a leading
// system message, where the model reads them like any other.
func withInstructions(req model.Request) model.Request {
	req.Messages = model.MessagesWithInstructions(req)
	req.Instructions = ""
	return req
}

func check(ctx context.Context, req model.Request) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("offline: %w", err)
	}
	if req.ConversationID != "" {
		return ErrNoConversations
	}
	return nil
}

// words splits text into stream deltas that join back to it exactly.
func words(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// messageID derives the reply's id from the request, so the same request
// always gets the same reply, ids included, while different conversations
// practically never share one.
func messageID(req model.Request) string {
	h := fnv.New64a()
	for _, m := range req.Messages {
		b, _ := json.Marshal(struct {
			R abi.Role
			C []abi.Content
		}{m.Role, m.Contents})
		h.Write(b)
	}
	return fmt.Sprintf("offline_%016x", h.Sum64())
}

func (t turn) callContents(id string) []abi.Content {
	var out []abi.Content
	for i, c := range t.calls {
		out = append(out, abi.Content{
			Type:      abi.ContentFunctionCall,
			CallID:    fmt.Sprintf("call_%s_%d", strings.TrimPrefix(id, "offline_"), i+1),
			Name:      c.name,
			Arguments: json.RawMessage(c.args),
		})
	}
	return out
}

func (t turn) finishReason() string {
	if len(t.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// usage counts words as tokens: deterministic and roughly proportional.
func (t turn) usage(req model.Request) *abi.Usage {
	var in int64
	for _, m := range req.Messages {
		in += int64(len(strings.Fields(m.TextContent())))
	}
	out := int64(len(strings.Fields(t.text)) + len(t.calls))
	return &abi.Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
}
