package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/session"
)

// TestApprovalAcrossRuns: a model response calls a tool that needs a
// person's approval and one that does not. The run ends there: the other
// tool ran, the request is recorded in the session as plain data (it
// survives a JSON round trip, as a process restart would see it), and a
// run without a decision is refused before any model call. The next run
// carries the decision (approve, or deny with a reason) with no input of
// its own and continues; the strict fakes accept every request and the
// stored history holds each call and each result once. For Chat
// Completions (the provider loads) and Responses (the service keeps the
// conversation), per run and per service call (sentinel, service
// conversation), and with a client stack used as is (the caller's job),
// with the in-memory and the SQLite plugin.
func TestApprovalAcrossRuns(t *testing.T) {
	sqlite := sqlitePlugin(t)
	providers := []struct {
		name string
		new  func(key string) agent.HistoryProvider
	}{
		{"in-memory", func(key string) agent.HistoryProvider { return agent.NewMemoryProvider(key) }},
		{"sqlite", func(key string) agent.HistoryProvider { return sqlite.Provider(key) }},
	}
	type mode struct {
		name          string
		perCall, asIs bool
		storesHistory bool // the agent stores the turns (not the caller's job)
		onlyResponses bool
	}
	modes := []mode{
		{name: "per-run", storesHistory: true},
		{name: "per-call", perCall: true, storesHistory: true},
		// Without the middleware nothing stores per call; a service that
		// keeps the conversation still needs the request recorded.
		{name: "caller's-job", perCall: true, asIs: true, onlyResponses: true},
	}
	for _, api := range []string{"chat", "responses"} {
		for _, m := range modes {
			if m.onlyResponses && api != "responses" {
				continue
			}
			for _, decision := range []string{"approve", "deny"} {
				for _, pv := range providers {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", api, m.name, decision, pv.name), func(t *testing.T) {
						ctx := context.Background()
						srv := openaitest.NewServer(t)
						var deletes atomic.Int32
						del := agent.Tool{Name: "delete", NeedsApproval: true, Func: func(context.Context, json.RawMessage) (any, error) {
							deletes.Add(1)
							return "deleted", nil
						}}
						p := pv.new("history")
						a, err := agent.New(agent.Config{
							Model:                            modelClient(api, srv.URL),
							Tools:                            []agent.Tool{del, clockTool()},
							Providers:                        []agent.ProviderConfig{{Provider: p, SkipLoad: api == "responses"}},
							RequirePerServiceCallPersistence: m.perCall,
							UseClientAsIs:                    m.asIs,
						})
						require.NoError(t, err)
						s := session.New()

						srv.Enqueue(openaitest.Calls(
							openaitest.ToolCall{ID: "c1", Name: "delete", Arguments: `{"file":"a.txt"}`},
							openaitest.ToolCall{ID: "c2", Name: "clock", Arguments: `{}`},
						))
						res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q1")}, nil)
						require.NoError(t, err)
						want := []agent.ApprovalRequest{{CallID: "c1", Name: "delete", Arguments: json.RawMessage(`{"file":"a.txt"}`)}}
						assert.Equal(t, want, res.ApprovalRequests)
						assert.Zero(t, deletes.Load(), "the tool ran before its approval")
						assert.Equal(t, "call:c1 call:c2 result:c2", renderIDs(res.Messages), "what the run returned")

						// The request is data in the session: a restarted
						// process reads it back from the JSON.
						b, err := session.Encode(s)
						require.NoError(t, err)
						s, err = session.Decode(b)
						require.NoError(t, err)
						assert.Equal(t, want, agent.PendingApprovals(s))
						require.Len(t, s.PendingToolCalls, 2)
						assert.True(t, s.PendingToolCalls[1].Done, "the clock's result is kept for the next run")
						if m.storesHistory {
							history := storedHistory(t, p, s)
							assert.Equal(t, "user:q1 call:c1 call:c2", renderIDs(history), "stored while waiting")
						}

						// No decision: refused, nothing sent, nothing changed.
						rev, sent := s.Revision, len(srv.Requests())
						_, err = a.Run(ctx, s, nil, nil)
						require.ErrorIs(t, err, agent.ErrApprovalRequired)
						assert.Contains(t, err.Error(), `delete {"file":"a.txt"}`)
						assert.Equal(t, rev, s.Revision)
						assert.Len(t, srv.Requests(), sent, "a model call without the decision")
						// A decision for a call that awaits none.
						_, err = a.Run(ctx, s, nil, &agent.RunOptions{Decisions: []agent.Decision{agent.Approve("c2")}})
						require.ErrorIs(t, err, agent.ErrConfig)

						d := agent.Approve("c1")
						if decision == "deny" {
							d = agent.Deny("c1", "not that file")
						}
						srv.Enqueue(openaitest.Text("done"))
						res, err = a.Run(ctx, s, nil, &agent.RunOptions{Decisions: []agent.Decision{d}})
						require.NoError(t, err, "the run with the decision was refused")
						reqs := srv.Requests()
						last := reqs[len(reqs)-1]
						wantSent := "result:c1 result:c2"
						if api == "chat" {
							wantSent = "user:q1 call:c1 call:c2 " + wantSent
						}
						assert.Equal(t, wantSent, sentItems(t, last), "what the decision's run sent")
						require.Len(t, res.Resumed, 2)
						assert.Equal(t, agent.ResumedWithResult, res.Resumed[1].How)
						c1 := resultOf(t, last, "c1")
						if decision == "approve" {
							assert.Equal(t, agent.ResumedApproved, res.Resumed[0].How)
							assert.EqualValues(t, 1, deletes.Load())
							assert.Contains(t, c1, "deleted")
						} else {
							assert.Equal(t, agent.ResumedDenied, res.Resumed[0].How)
							assert.Zero(t, deletes.Load(), "a denied tool ran")
							assert.Contains(t, c1, "the user denied this call: not that file")
						}
						assert.Equal(t, "done", res.Text())
						assert.Empty(t, s.PendingToolCalls)
						assert.Empty(t, agent.PendingApprovals(s))
						if m.storesHistory {
							history := storedHistory(t, p, s)
							assert.Equal(t, "user:q1 call:c1 call:c2 result:c1 result:c2 asst:done", renderIDs(history))
							requirePaired(t, history)
						}

						// And the conversation goes on.
						srv.Enqueue(openaitest.Text("more"))
						_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q3")}, nil)
						require.NoError(t, err, "the turn after the decision was refused")
					})
				}
			}
		}
	}
}

// storedHistory is what the provider holds for s, as provide serves it.
func storedHistory(t *testing.T, p agent.HistoryProvider, s *session.Session) []abi.Message {
	t.Helper()
	out, err := p.Provide(context.Background(), s, nil)
	require.NoError(t, err)
	return out
}

// resultOf returns what a request carried as the result of call id: its
// output item (Responses) or tool message (Chat Completions), as JSON text.
func resultOf(t *testing.T, r openaitest.Request, id string) string {
	t.Helper()
	if r.Responses != nil {
		items, err := r.Responses.Items()
		require.NoError(t, err)
		for _, it := range items {
			if it.Type == "function_call_output" && it.CallID == id {
				return string(it.Output)
			}
		}
		t.Fatalf("no output for %s", id)
	}
	for _, m := range r.Chat.Messages {
		if m.Role == "tool" && m.ToolCallID == id {
			return string(m.Content)
		}
	}
	t.Fatalf("no tool message for %s", id)
	return ""
}
