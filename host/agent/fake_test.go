package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
)

// fakeService is an in-process model service that behaves like an
// OpenAI-compatible one closely enough to catch persistence mistakes:
//   - it keeps a conversation when the request's store (or its default when
//     unset) says so, and returns its id;
//   - it refuses unknown conversation ids (the local sentinel included);
//   - it refuses a conversation that breaks the chat ordering rules
//     (openaitest.ValidateHistory), judged on everything it sees;
//   - it answers with a tool call to a user message and with text to tool
//     results, unless a script says otherwise.
type fakeService struct {
	mu       sync.Mutex
	stores   bool // the service keeps conversations when store is unset
	noID     bool // keeps conversations but never returns an id
	convs    map[string][]abi.Message
	nextConv int
	nextCall int
	calls    int
	failAt   int // the failAt-th call fails (0: never)
	// reply, when set, answers instead of the default script.
	reply func(n int, conv []abi.Message) abi.Message
	// observe runs at the start of each call (before validation), e.g. to
	// capture what was persisted by then.
	observe func(req model.Request)
	reqs    []model.Request
}

var errServiceDown = errors.New("fake service: unavailable")

type fakeStorer struct{ *fakeService }

func (f fakeStorer) StoresHistoryByDefault() bool { return f.stores }

// client returns the service as a model.Client; it implements
// model.HistoryStorer.
func (f *fakeService) client() model.Client { return fakeStorer{f} }

func (f *fakeService) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	// Instructions reach the model as a leading system message, as the
	// Chat Completions client sends them.
	req.Messages = model.MessagesWithInstructions(req)
	req.Instructions = ""
	if f.observe != nil {
		f.observe(req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.reqs = append(f.reqs, cloneRequest(req))
	if f.calls == f.failAt {
		return nil, errServiceDown
	}
	conv, err := f.view(req)
	if err != nil {
		return nil, err
	}
	var out abi.Message
	if f.reply != nil {
		out = f.reply(f.calls, conv)
	} else {
		out = f.defaultReply(conv)
	}
	resp := &model.Response{Messages: []abi.Message{out}, Usage: &abi.Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}}
	store := f.stores
	if req.Store != nil {
		store = *req.Store
	}
	if store {
		id := req.ConversationID
		if id == "" {
			f.nextConv++
			id = fmt.Sprintf("conv-%d", f.nextConv)
		}
		if f.convs == nil {
			f.convs = map[string][]abi.Message{}
		}
		f.convs[id] = append(conv, out)
		if !f.noID {
			resp.ConversationID = id
		}
	}
	return resp, nil
}

// view is the conversation as the service sees it for this request.
func (f *fakeService) view(req model.Request) ([]abi.Message, error) {
	if strings.HasPrefix(req.ConversationID, "wasmhist:") {
		return nil, fmt.Errorf("fake service: sentinel conversation id %q reached the model", req.ConversationID)
	}
	var conv []abi.Message
	if req.ConversationID != "" {
		prev, ok := f.convs[req.ConversationID]
		if !ok {
			return nil, fmt.Errorf("fake service: unknown conversation %q", req.ConversationID)
		}
		conv = append(conv, prev...)
	}
	conv = append(conv, req.Messages...)
	if err := openaitest.ValidateHistory(conv); err != nil {
		return nil, fmt.Errorf("fake service: %w", err)
	}
	return conv, nil
}

func (f *fakeService) defaultReply(conv []abi.Message) abi.Message {
	last := conv[len(conv)-1]
	if last.Role == abi.RoleTool {
		return abi.NewMessage(abi.RoleAssistant, "answer to "+last.Contents[0].CallID)
	}
	f.nextCall++
	return callMsg("", fmt.Sprintf("c%d", f.nextCall))
}

// Stream yields the completed reply in pieces: text in two deltas,
// calls whole, the conversation id last.
func (f *fakeService) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		resp, err := f.Complete(ctx, req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		for i, m := range resp.Messages {
			id := fmt.Sprintf("m%d", i)
			if !yield(model.Update{MessageID: id, Role: m.Role}, nil) {
				return
			}
			for _, c := range m.Contents {
				parts := []abi.Content{c}
				if c.Type == abi.ContentText && len(c.Text) > 1 {
					half := len(c.Text) / 2
					parts = []abi.Content{abi.Text(c.Text[:half]), abi.Text(c.Text[half:])}
				}
				for _, p := range parts {
					if !yield(model.Update{MessageID: id, Contents: []abi.Content{p}}, nil) {
						return
					}
				}
			}
		}
		yield(model.Update{ConversationID: resp.ConversationID, Usage: resp.Usage, FinishReason: "stop"}, nil)
	}
}

func (f *fakeService) requests() []model.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]model.Request(nil), f.reqs...)
}

func cloneRequest(r model.Request) model.Request {
	r.Messages = append([]abi.Message(nil), r.Messages...)
	if r.Store != nil {
		v := *r.Store
		r.Store = &v
	}
	return r
}

// callMsg is an assistant message with optional text and tool calls.
func callMsg(text string, ids ...string) abi.Message {
	m := abi.Message{Role: abi.RoleAssistant}
	if text != "" {
		m.Contents = append(m.Contents, abi.Text(text))
	}
	for _, id := range ids {
		m.Contents = append(m.Contents, abi.Content{Type: abi.ContentFunctionCall, CallID: id, Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)})
	}
	return m
}

// render names messages compactly: user:q, call:c1, result:c1, asst:text,
// system:text; text before a call shows as asst:text+call:c1.
func render(msgs []abi.Message) string {
	var out []string
	for _, m := range msgs {
		var parts []string
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentText:
				if m.Role == abi.RoleAssistant {
					parts = append(parts, "asst:"+c.Text)
				} else {
					parts = append(parts, string(m.Role)+":"+c.Text)
				}
			case abi.ContentFunctionCall:
				parts = append(parts, "call:"+c.CallID)
			case abi.ContentFunctionResult:
				parts = append(parts, "result:"+c.CallID)
			}
		}
		out = append(out, strings.Join(parts, "+"))
	}
	return strings.Join(out, " ")
}

func lookupTool() Tool {
	return Tool{
		Name:        "lookup",
		Description: "looks something up",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Func: func(ctx context.Context, args json.RawMessage) (any, error) {
			return map[string]string{"found": "42"}, nil
		},
	}
}

// logCapture records slog records so tests can count warnings.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Level >= slog.LevelWarn {
		c.msgs = append(c.msgs, r.Message)
	}
	return nil
}
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

func (c *logCapture) warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.msgs...)
}

func (c *logCapture) logger() *slog.Logger { return slog.New(c) }

// runAgent runs one turn, streaming or not, and returns the result built
// from the stream (messages collected from RunUpdate.Message).
func runAgent(ctx context.Context, t *testing.T, a *Agent, s *session.Session, stream bool, input string, opts *RunOptions) (*RunResult, error) {
	t.Helper()
	in := []abi.Message{abi.NewMessage(abi.RoleUser, input)}
	if !stream {
		return a.Run(ctx, s, in, opts)
	}
	res := &RunResult{}
	for u, err := range a.RunStream(ctx, s, in, opts) {
		if err != nil {
			return nil, err
		}
		if u.Model != nil {
			require.False(t, strings.HasPrefix(u.Model.ConversationID, "wasmhist:"), "the sentinel conversation id reached the consumer: %+v", u.Model)
		}
		if u.Message != nil {
			res.Messages = append(res.Messages, *u.Message)
		}
	}
	return res, nil
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func stored(t *testing.T, p *MemoryProvider, s *session.Session) string {
	t.Helper()
	msgs, err := p.Messages(s)
	require.NoError(t, err)
	return render(msgs)
}
