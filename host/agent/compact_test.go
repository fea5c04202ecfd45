package agent_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/session"
)

// recorder is a model client that keeps every request it passes on.
type recorder struct {
	next model.Client
	mu   sync.Mutex
	reqs []model.Request
}

func (r *recorder) keep(req model.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
}

func (r *recorder) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	r.keep(req)
	return r.next.Complete(ctx, req)
}

func (r *recorder) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	r.keep(req)
	return r.next.Stream(ctx, req)
}

// last returns the last request that was not a summary request.
func (r *recorder) last(t *testing.T) model.Request {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reqs) - 1; i >= 0; i-- {
		if !isSummaryRequest(r.reqs[i].Messages) {
			return r.reqs[i]
		}
	}
	t.Fatal("no run request")
	return model.Request{}
}

func isSummaryRequest(msgs []abi.Message) bool {
	return len(msgs) > 0 && msgs[len(msgs)-1].TextContent() == agent.SummaryPrompt
}

// TestCompactionWithOfflineModel: with a budget the history soon exceeds,
// the offline model (whose summary restates the user's statements) writes
// the summary; the run sends it in place of the oldest turns, which stay
// stored; the conversation still remembers what only the summary carries
// now; deleting the record undoes the compaction and the next run makes the
// same summary again. Per run and per service call (sentinel mode).
func TestCompactionWithOfflineModel(t *testing.T) {
	sqlite := sqlitePlugin(t)
	providers := []struct {
		name string
		new  func(key string) agent.HistoryProvider
	}{
		{"in-memory", func(key string) agent.HistoryProvider { return agent.NewMemoryProvider(key) }},
		{"sqlite", func(key string) agent.HistoryProvider { return sqlite.Provider(key) }},
	}
	for _, perCall := range []bool{false, true} {
		for _, pv := range providers {
			t.Run(fmt.Sprintf("per-call=%v/%s", perCall, pv.name), func(t *testing.T) {
				ctx := context.Background()
				rec := &recorder{next: offline.New()}
				p := pv.new("history")
				cfg := agent.Config{
					Model:                            rec,
					Providers:                        []agent.ProviderConfig{{Provider: p}},
					RequirePerServiceCallPersistence: perCall,
					Compaction:                       agent.Compaction{MaxTokens: 60, KeepTokens: 30},
				}
				a, err := agent.New(cfg)
				require.NoError(t, err)
				s := session.New()
				lines := []string{"I like green tea", "My name is Ann", "I love old jazz records", "Remember that the meeting is on Friday"}
				for _, l := range lines {
					_, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, l)}, nil)
					require.NoError(t, err, l)
				}
				require.Contains(t, s.Compactions, "history", "no compaction under a budget of 60 tokens")
				c := s.Compactions["history"]
				assert.Contains(t, c.Summary, "I like green tea")

				// Every original message is stored, none is the summary.
				stored, err := p.Provide(ctx, s, nil)
				require.NoError(t, err)
				require.Len(t, stored, 2*len(lines))
				for i, l := range lines {
					assert.Equal(t, l, stored[2*i].TextContent())
				}

				// What is sent: the summary first, then only the newest turns.
				res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "what do I like?")}, nil)
				require.NoError(t, err)
				assert.Equal(t, "You told me you like green tea and you love old jazz records.", res.Text(), "what the summary carries is remembered")
				sent := rec.last(t).Messages
				require.NotEmpty(t, sent)
				assert.True(t, strings.HasPrefix(sent[0].TextContent(), agent.SummaryPrefix), "the first message sent is the summary: %q", sent[0].TextContent())
				assert.Contains(t, sent[0].AdditionalProperties, agent.SummaryProperty)
				for _, m := range sent[1:] {
					assert.NotEqual(t, "I like green tea", m.TextContent(), "a summarised message was sent")
				}
				stored, err = p.Provide(ctx, s, nil)
				require.NoError(t, err)
				assert.Len(t, stored, 2*len(lines)+2, "the turn is stored, the summary is not")

				// Undo: the originals are sent again; redo: the same summary.
				before := s.Compactions["history"]
				s.DeleteCompaction("history")
				off, err := agent.New(agent.Config{Model: rec, Providers: cfg.Providers, RequirePerServiceCallPersistence: perCall})
				require.NoError(t, err)
				_, err = off.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "hello")}, nil)
				require.NoError(t, err)
				assert.Equal(t, "I like green tea", rec.last(t).Messages[0].TextContent(), "after undo the originals are sent")
				assert.Empty(t, s.Compactions)
				_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "hello again")}, nil)
				require.NoError(t, err)
				require.Contains(t, s.Compactions, "history")
				assert.Contains(t, s.Compactions["history"].Summary, before.Summary[:strings.Index(before.Summary, ".")], "redone from the same messages")

				// The record is plain data that survives a round trip.
				b, err := session.Encode(s)
				require.NoError(t, err)
				back, err := session.Decode(b)
				require.NoError(t, err)
				assert.Equal(t, s.Compactions, back.Compactions)
			})
		}
	}
}

// TestCompactionAgainstStrictFake: Chat Completions against the strict
// fake, per run and per service call, in-memory and SQLite: a tool loop
// turn and statement turns until the budget is exceeded. The fake accepts
// every request (the summary request and the compacted runs: no call is
// separated from its results), the stored history keeps every original
// message, paired, and the summary stands for whole groups only.
func TestCompactionAgainstStrictFake(t *testing.T) {
	sqlite := sqlitePlugin(t)
	providers := []struct {
		name string
		new  func(key string) agent.HistoryProvider
	}{
		{"in-memory", func(key string) agent.HistoryProvider { return agent.NewMemoryProvider(key) }},
		{"sqlite", func(key string) agent.HistoryProvider { return sqlite.Provider(key) }},
	}
	for _, perCall := range []bool{false, true} {
		for _, pv := range providers {
			t.Run(fmt.Sprintf("per-call=%v/%s", perCall, pv.name), func(t *testing.T) {
				ctx := context.Background()
				srv := openaitest.NewServer(t)
				srv.Handle(func(r openaitest.Request) openaitest.Reply {
					msgs := r.Chat.Messages
					last := msgs[len(msgs)-1]
					switch {
					case last.Role == "tool":
						return openaitest.Text("it is noon")
					case last.Text() == agent.SummaryPrompt:
						return openaitest.Text(fmt.Sprintf("SUMMARY of %d messages", len(msgs)-1))
					case last.Text() == "time?":
						return openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`})
					}
					return openaitest.Text("ok: " + last.Text())
				})
				p := pv.new("history")
				a, err := agent.New(agent.Config{
					Model:                            modelClient("chat", srv.URL),
					Tools:                            []agent.Tool{clockTool()},
					Providers:                        []agent.ProviderConfig{{Provider: p}},
					RequirePerServiceCallPersistence: perCall,
					Compaction:                       agent.Compaction{MaxTokens: 70, KeepTokens: 25},
				})
				require.NoError(t, err)
				s := session.New()
				lines := []string{"time?", "the first statement of some length", "the second statement of some length",
					"the third statement of some length", "the fourth statement of some length"}
				for _, l := range lines {
					_, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, l)}, nil)
					require.NoError(t, err, "the fake refused a request after %q", l)
				}
				require.Contains(t, s.Compactions, "history")
				c := s.Compactions["history"]
				stored, err := p.Provide(ctx, s, nil)
				require.NoError(t, err)
				assert.Equal(t, "user:time? call:c1 result:c1 asst:it is noon "+
					"user:the first statement of some length asst:ok: the first statement of some length "+
					"user:the second statement of some length asst:ok: the second statement of some length "+
					"user:the third statement of some length asst:ok: the third statement of some length "+
					"user:the fourth statement of some length asst:ok: the fourth statement of some length",
					renderIDs(stored), "every original stored, in order")
				requirePaired(t, stored)
				require.NoError(t, openaitest.ValidateHistory(stored))
				// The summary covers whole groups: the kept part starts
				// with a user message, never a tool result.
				require.Less(t, c.Covers, len(stored))
				assert.Equal(t, abi.RoleUser, stored[c.Covers].Role, "the summary ends inside a turn")
				assert.GreaterOrEqual(t, c.Covers, 4, "the tool loop is summarised whole")

				var summaries int
				for _, r := range srv.Requests() {
					items := sentItems(t, r)
					if strings.HasSuffix(items, "user:"+agent.SummaryPrompt) {
						summaries++
					}
				}
				assert.GreaterOrEqual(t, summaries, 1)
				last := srv.LastRequest()
				sent := sentItems(t, last)
				assert.Contains(t, sent, "user:"+agent.SummaryPrefix+"SUMMARY", "the run sends the summary")
				assert.NotContains(t, sent, "call:c1", "the summarised call was sent")
			})
		}
	}
}
