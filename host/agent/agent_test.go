package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/agent/reducer"
)

func TestNewAgentConfigErrors(t *testing.T) {
	svc := &fakeService{}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no model", Config{}},
		{"two loaders", Config{Model: svc, Providers: []ProviderConfig{{Provider: NewMemoryProvider("a")}, {Provider: NewMemoryProvider("b")}}}},
		{"shared state key", Config{Model: svc, Providers: []ProviderConfig{{Provider: NewMemoryProvider("a")}, Audit(NewMemoryProvider("a"))}}},
		{"nil provider", Config{Model: svc, Providers: []ProviderConfig{{}}}},
		{"empty state key", Config{Model: svc, Providers: []ProviderConfig{{Provider: NewMemoryProvider("")}}}},
		{"tool without func", Config{Model: svc, Tools: []Tool{{Name: "x"}}}},
		{"duplicate tool", Config{Model: svc, Tools: []Tool{lookupTool(), lookupTool()}}},
		{"bad tool schema", Config{Model: svc, Tools: []Tool{{Name: "x", Func: lookupTool().Func, Parameters: json.RawMessage(`{"type":7}`)}}}},
		{"negative iterations", Config{Model: svc, MaxIterations: -1}},
		{"negative parallel tools", Config{Model: svc, MaxParallelTools: -1}},
		{"unknown conflict mode", Config{Model: svc, Conflict: ConflictClear + 1}},
		{"negative conflict mode", Config{Model: svc, Conflict: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.ErrorIs(t, err, ErrConfig)
		})
	}
	t.Run("one loader and audits", func(t *testing.T) {
		_, err := New(Config{Model: svc, Providers: []ProviderConfig{
			{Provider: NewMemoryProvider("a")}, Audit(NewMemoryProvider("b")), Audit(NewMemoryProvider("c")),
		}})
		require.NoError(t, err)
	})
}

func TestAgentFailureMidLoop(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		for _, perCall := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v/per-call=%v", streaming, perCall), func(t *testing.T) {
				ctx := context.Background()
				primary, audit := NewMemoryProvider("primary"), NewMemoryProvider("audit")
				svc := &fakeService{failAt: 2}
				a, err := New(Config{
					Model:                            svc.client(),
					Tools:                            []Tool{lookupTool()},
					Providers:                        []ProviderConfig{{Provider: primary}, Audit(audit)},
					RequirePerServiceCallPersistence: perCall,
				})
				require.NoError(t, err)
				s := session.New()
				s.State = map[string]session.ProviderState{"other": {Provider: "x", Data: json.RawMessage(`{"keep":true}`)}}
				before := mustJSON(t, s)
				_, err = runAgent(ctx, t, a, s, streaming, "q1", nil)
				require.ErrorIs(t, err, errServiceDown)
				if !perCall {
					// Atomic: byte-identical when re-serialized.
					require.Equal(t, before, mustJSON(t, s), "a failed run leaves the session unchanged")
					return
				}
				// The first call succeeded and stays stored.
				for _, p := range []*MemoryProvider{primary, audit} {
					assert.Equal(t, "user:q1 call:c1", stored(t, p, s))
				}
				// The tool ran before the failure: its result is committed
				// as the open call's, for the next run to send.
				assert.Equal(t, int64(2), s.Revision, "revision: the call, then the tool's result")
				require.Len(t, s.PendingToolCalls, 1)
				p := s.PendingToolCalls[0]
				assert.Equal(t, "c1", p.CallID)
				assert.True(t, p.Done, "the result was computed")
				assert.JSONEq(t, `{"found":"42"}`, string(p.Result))
				assert.Equal(t, `{"keep":true}`, string(s.State["other"].Data), "unrelated state is left alone")
			})
		}
	}
}

// A tool that ends the loop leaves trailing results. Per-run persistence
// stores them (per-run persistence keeps the modelled behaviour, and the pairs
// keep the history replayable); per-service-call persistence never does,
// since no model was sent them.
func TestAgentTerminatedLoop(t *testing.T) {
	stop := Tool{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`), Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
		TerminateLoop(ctx)
		return "stopped", nil
	}}
	tests := []struct {
		name    string
		perCall bool
		want    string
	}{
		{"per-run keeps trailing results", false, "user:q1 call:c1 result:c1"},
		{"per-call drops trailing results", true, "user:q1 call:c1"},
	}
	for _, tc := range tests {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, streaming), func(t *testing.T) {
				ctx := context.Background()
				primary := NewMemoryProvider("primary")
				svc := &fakeService{}
				a, err := New(Config{Model: svc.client(), Tools: []Tool{stop}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: tc.perCall})
				require.NoError(t, err)
				s := session.New()
				res, err := runAgent(ctx, t, a, s, streaming, "q1", nil)
				require.NoError(t, err)
				if !streaming {
					assert.True(t, res.Terminated, "Terminated")
					assert.Equal(t, 1, res.Iterations, "Iterations")
				}
				assert.Equal(t, "call:c1 result:c1", render(res.Messages))
				assert.Equal(t, tc.want, stored(t, primary, s))

				// Resume: the next run's request must satisfy a strict
				// service (the fake validates every request), whichever
				// way the previous run stored its end.
				_, err = runAgent(ctx, t, a, s, streaming, "q2", nil)
				require.NoError(t, err, "resume")
				reqs := svc.requests()
				require.NoError(t, openaitest.ValidateHistory(reqs[len(reqs)-1].Messages), "resumed request rejected")
				if !tc.perCall {
					msgs, _ := primary.Messages(s)
					require.NoError(t, openaitest.ValidateHistory(msgs), "stored history is not replayable")
				}
			})
		}
	}
}

func TestAgentResumeWithTrailingResultsAsInput(t *testing.T) {
	// After a per-call run a tool terminated, the caller can hand the tool
	// results back as input; they pair with the stored call.
	ctx := context.Background()
	primary := NewMemoryProvider("primary")
	stop := lookupTool()
	stop.Func = func(ctx context.Context, _ json.RawMessage) (any, error) { TerminateLoop(ctx); return "r", nil }
	svc := &fakeService{}
	a, err := New(Config{Model: svc.client(), Tools: []Tool{stop}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: true})
	require.NoError(t, err)
	s := session.New()
	res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q1")}, nil)
	require.NoError(t, err)
	trailing := res.Messages[len(res.Messages)-1:]
	_, err = a.Run(ctx, s, trailing, nil)
	require.NoError(t, err)
	reqs := svc.requests()
	assert.Equal(t, "user:q1 call:c1 result:c1", render(reqs[len(reqs)-1].Messages))
	assert.Equal(t, "user:q1 call:c1 result:c1 asst:answer to c1", stored(t, primary, s))
}

func TestAgentParallelToolsInCallOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bStarted := make(chan struct{})
	slow := Tool{Name: "a", Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
		// Finishes only once b has started: sequential execution would
		// never get there.
		select {
		case <-bStarted:
			return "A", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	fast := Tool{Name: "b", Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
		close(bStarted)
		return "B", nil
	}}
	svc := &fakeService{reply: func(n int, conv []abi.Message) abi.Message {
		if n == 1 {
			m := abi.Message{Role: abi.RoleAssistant}
			m.Contents = []abi.Content{
				{Type: abi.ContentFunctionCall, CallID: "x", Name: "a", Arguments: json.RawMessage(`{}`)},
				{Type: abi.ContentFunctionCall, CallID: "y", Name: "b", Arguments: json.RawMessage(`{}`)},
			}
			return m
		}
		return abi.NewMessage(abi.RoleAssistant, "done")
	}}
	a, err := New(Config{Model: svc.client(), Tools: []Tool{slow, fast}})
	require.NoError(t, err)
	res, err := a.Run(ctx, session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "go")}, nil)
	require.NoError(t, err)
	require.Equal(t, "call:x+call:y result:x result:y asst:done", render(res.Messages))
	require.Equal(t, `"A"`, string(res.Messages[1].Contents[0].Result), "first result")
}

func TestAgentToolErrors(t *testing.T) {
	boom := Tool{Name: "boom", Func: func(context.Context, json.RawMessage) (any, error) { panic("kaput") }}
	fails := Tool{Name: "fails", Func: func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("nope") }}
	tests := []struct {
		name, tool, args, wantErr string
	}{
		{"unknown tool", "missing", `{}`, "unknown tool"},
		{"invalid arguments", "lookup", `{"q":1}`, "invalid arguments"},
		{"not JSON", "lookup", `{`, "not JSON"},
		{"panic", "boom", `{}`, "panicked"},
		{"error", "fails", `{}`, "nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := &fakeService{reply: func(n int, _ []abi.Message) abi.Message {
				if n == 1 {
					return abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "k", Name: tc.tool, Arguments: json.RawMessage(tc.args)}}}
				}
				return abi.NewMessage(abi.RoleAssistant, "ok")
			}}
			a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool(), boom, fails}})
			require.NoError(t, err)
			res, err := a.Run(context.Background(), session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "go")}, nil)
			require.NoError(t, err)
			require.Contains(t, res.Messages[1].Contents[0].Error, tc.wantErr, "tool error")
		})
	}
}

func TestAgentMaxIterations(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", streaming), func(t *testing.T) {
			primary := NewMemoryProvider("primary")
			svc := &fakeService{reply: func(n int, _ []abi.Message) abi.Message {
				return callMsg("thinking", fmt.Sprintf("k%d", n))
			}}
			a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, MaxIterations: 2})
			require.NoError(t, err)
			s := session.New()
			_, err = runAgent(context.Background(), t, a, s, streaming, "q", nil)
			require.NoError(t, err)
			require.Len(t, svc.requests(), 2, "model calls")
			// The last call's tool call was never run: its text stays,
			// the call goes.
			require.Equal(t, "user:q asst:thinking+call:k1 result:k1 asst:thinking", stored(t, primary, s))
		})
	}
}

// A consumer that stops early is not a failure: the completed calls and
// tool results are stored, orphan calls removed, the call in flight dropped.
func TestAgentStreamStopEarly(t *testing.T) {
	tests := []struct {
		name      string
		perCall   bool
		stopAfter func(u RunUpdate) bool
		want      string
	}{
		{"per-run: after the call message, text kept, call dropped", false,
			func(u RunUpdate) bool { return u.Message != nil && u.Message.Role == abi.RoleAssistant },
			"user:q asst:let me look"},
		{"per-run: after the tool result", false,
			func(u RunUpdate) bool { return u.Message != nil && u.Message.Role == abi.RoleTool },
			"user:q asst:let me look+call:c1 result:c1"},
		{"per-run: in the middle of the answer", false,
			func(u RunUpdate) bool {
				return u.Model != nil && len(u.Model.Contents) > 0 && strings.HasPrefix("answer to c1", u.Model.Contents[0].Text) && u.Model.Contents[0].Text != ""
			},
			"user:q asst:let me look+call:c1 result:c1"},
		{"per-call: in the middle of the answer", true,
			func(u RunUpdate) bool {
				return u.Model != nil && len(u.Model.Contents) > 0 && strings.HasPrefix("answer to c1", u.Model.Contents[0].Text) && u.Model.Contents[0].Text != ""
			},
			"user:q asst:let me look+call:c1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			primary := NewMemoryProvider("primary")
			svc := &fakeService{}
			svc.reply = func(n int, conv []abi.Message) abi.Message {
				if conv[len(conv)-1].Role == abi.RoleTool {
					return abi.NewMessage(abi.RoleAssistant, "answer to c1")
				}
				return callMsg("let me look", "c1")
			}
			a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: tc.perCall})
			require.NoError(t, err)
			s := session.New()
			stopped := false
			for u, err := range a.RunStream(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil) {
				require.NoError(t, err)
				if tc.stopAfter(u) {
					stopped = true
					break
				}
			}
			require.True(t, stopped, "the stop condition never held")
			require.Equal(t, tc.want, stored(t, primary, s))
			require.NotZero(t, s.Revision, "nothing committed")
		})
	}
}

func TestStreamAggregation(t *testing.T) {
	var a aggregator
	for _, u := range []model.Update{
		{MessageID: "1", Role: abi.RoleAssistant},
		{MessageID: "1", Contents: []abi.Content{{Type: abi.ContentReasoning, Text: "hm"}, {Type: abi.ContentReasoning, Text: "m"}}},
		{MessageID: "1", Contents: []abi.Content{abi.Text("Hel")}},
		{MessageID: "1", Contents: []abi.Content{abi.Text("lo")}},
		{MessageID: "1", Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "a", Name: "f"}}},
		{MessageID: "2", Contents: []abi.Content{abi.Text("second")}},
		{Usage: &abi.Usage{TotalTokens: 3}},
		{ConversationID: "conv", Usage: &abi.Usage{TotalTokens: 4}, FinishReason: "stop"},
	} {
		a.add(u)
	}
	r := a.response()
	require.Equal(t, "asst:Hello+call:a asst:second", render(r.Messages))
	require.Equal(t, "hmm", r.Messages[0].Contents[0].Text, "reasoning folded")
	require.Equal(t, "1", r.Messages[0].MessageID)
	require.Equal(t, "conv", r.ConversationID)
	require.NotNil(t, r.Usage)
	require.Equal(t, int64(7), r.Usage.TotalTokens, "usage summed")
	require.Equal(t, "stop", r.FinishReason)
}

// A primary and an audit copy of the same provider implementation keep
// separate state; the audit copy sees context messages, is never loaded,
// and clearing the primary leaves it alone.
func TestAgentPrimaryAndAuditNeverMix(t *testing.T) {
	ctx := context.Background()
	primary, audit := NewMemoryProvider("primary"), NewMemoryProvider("audit")
	svc := &fakeService{}
	a, err := New(Config{
		Model:            svc.client(),
		Tools:            []Tool{lookupTool()},
		Providers:        []ProviderConfig{{Provider: primary}, Audit(audit)},
		ContextProviders: []ContextProvider{staticContext{"facts", "user likes tea"}},
	})
	require.NoError(t, err)
	s := session.New()
	_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q1")}, nil)
	require.NoError(t, err)
	turn := "user:q1 call:c1 result:c1 asst:answer to c1"
	assert.Equal(t, turn, stored(t, primary, s))
	assert.Equal(t, "user:user likes tea "+turn, stored(t, audit, s))
	require.NoError(t, primary.Clear(ctx, s))
	assert.Equal(t, "", stored(t, primary, s))
	assert.Equal(t, "user:user likes tea "+turn, stored(t, audit, s))
	_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q2")}, nil)
	require.NoError(t, err)
	reqs := svc.requests()
	// Only the (cleared) primary loads: the audit copy never reaches the model.
	assert.Equal(t, "user:user likes tea user:q2", render(reqs[len(reqs)-2].Messages))
	src := reqs[len(reqs)-2].Messages[0].Source
	if assert.NotNil(t, src, "context message source") {
		assert.Equal(t, abi.SourceContextProvider, src.Type)
		assert.Equal(t, "facts", src.ID)
	}
}

type staticContext struct{ name, text string }

func (c staticContext) Name() string { return c.name }
func (c staticContext) Context(context.Context, *session.Session, []abi.Message) ([]abi.Message, error) {
	return []abi.Message{abi.NewMessage(abi.RoleUser, c.text)}, nil
}

func TestAgentProviderFlagsAndFilters(t *testing.T) {
	ctx := context.Background()
	seed := func(p *MemoryProvider, s *session.Session) {
		require.NoError(t, p.Store(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "old"), abi.NewMessage(abi.RoleUser, "secret")}, []abi.Message{abi.NewMessage(abi.RoleAssistant, "old answer")}))
	}
	dropSecret := func(msgs []abi.Message) []abi.Message {
		var out []abi.Message
		for _, m := range msgs {
			if m.TextContent() != "secret" {
				out = append(out, m)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		pc       func(p *MemoryProvider) ProviderConfig
		wantSent string
		want     string
	}{
		{"defaults", func(p *MemoryProvider) ProviderConfig { return ProviderConfig{Provider: p} },
			"user:old user:secret asst:old answer user:q", "user:old user:secret asst:old answer user:q asst:a"},
		{"skip store inputs", func(p *MemoryProvider) ProviderConfig { return ProviderConfig{Provider: p, SkipStoreInputs: true} },
			"user:old user:secret asst:old answer user:q", "user:old user:secret asst:old answer asst:a"},
		{"skip store outputs", func(p *MemoryProvider) ProviderConfig { return ProviderConfig{Provider: p, SkipStoreOutputs: true} },
			"user:old user:secret asst:old answer user:q", "user:old user:secret asst:old answer user:q"},
		{"skip load", func(p *MemoryProvider) ProviderConfig { return ProviderConfig{Provider: p, SkipLoad: true} },
			"user:q", "user:old user:secret asst:old answer user:q asst:a"},
		{"provide filter", func(p *MemoryProvider) ProviderConfig { return ProviderConfig{Provider: p, ProvideFilter: dropSecret} },
			"user:old asst:old answer user:q", "user:old user:secret asst:old answer user:q asst:a"},
		{"store input filter", func(p *MemoryProvider) ProviderConfig {
			return ProviderConfig{Provider: p, StoreInputFilter: func([]abi.Message) []abi.Message { return nil }}
		}, "user:old user:secret asst:old answer user:q", "user:old user:secret asst:old answer asst:a"},
		{"reducer", func(p *MemoryProvider) ProviderConfig {
			return ProviderConfig{Provider: p, Reducer: reducer.MessageWindow{Max: 1}}
		}, "asst:old answer user:q", "user:old user:secret asst:old answer user:q asst:a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewMemoryProvider("p")
			svc := &fakeService{reply: func(int, []abi.Message) abi.Message { return abi.NewMessage(abi.RoleAssistant, "a") }}
			a, err := New(Config{Model: svc.client(), Providers: []ProviderConfig{tc.pc(p)}})
			require.NoError(t, err)
			s := session.New()
			seed(p, s)
			_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
			require.NoError(t, err)
			assert.Equal(t, tc.wantSent, render(svc.requests()[0].Messages))
			assert.Equal(t, tc.want, stored(t, p, s))
		})
	}
}

func TestAgentHistoryIsStampedAndInstructionsSent(t *testing.T) {
	ctx := context.Background()
	p := NewMemoryProvider("p")
	svc := &fakeService{reply: func(int, []abi.Message) abi.Message { return abi.NewMessage(abi.RoleAssistant, "a") }}
	a, err := New(Config{Model: svc.client(), Instructions: "be brief", Providers: []ProviderConfig{{Provider: p}}})
	require.NoError(t, err)
	s := session.New()
	for _, q := range []string{"q1", "q2"} {
		_, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, q)}, nil)
		require.NoError(t, err)
	}
	sent := svc.requests()[1].Messages
	require.Equal(t, "system:be brief user:q1 asst:a user:q2", render(sent))
	for i, want := range []*abi.Source{nil, {Type: abi.SourceChatHistory, ID: "p"}, {Type: abi.SourceChatHistory, ID: "p"}, {Type: abi.SourceExternal}} {
		assert.Equal(t, want, sent[i].Source, "message %d source", i)
	}
	// Instructions are never stored; history is not stored twice.
	require.Equal(t, "user:q1 asst:a user:q2 asst:a", stored(t, p, s))
}

func TestAgentConflictModes(t *testing.T) {
	tests := []struct {
		name         string
		mode         ConflictMode
		wantPrimary  string
		wantWarnings int
	}{
		{"warn stores and warns once", ConflictWarn, "user:q1 call:c1 result:c1 asst:answer to c1 user:q2 call:c2 result:c2 asst:answer to c2", 1},
		{"clear leaves the loader empty", ConflictClear, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			primary, audit := NewMemoryProvider("primary"), NewMemoryProvider("audit")
			logs := &logCapture{}
			svc := &fakeService{stores: true}
			a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}, Audit(audit)}, Conflict: tc.mode, Logger: logs.logger()})
			require.NoError(t, err)
			s := session.New()
			for _, q := range []string{"q1", "q2"} {
				_, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, q)}, nil)
				require.NoError(t, err)
			}
			assert.Equal(t, "conv-1", s.ServiceSessionID, "service session id")
			assert.Equal(t, tc.wantPrimary, stored(t, primary, s))
			got := stored(t, audit, s)
			assert.True(t, strings.HasSuffix(got, "user:q2 call:c2 result:c2 asst:answer to c2"), "audit %q ends with the second run", got)
			// The second run continues the service conversation without
			// loading history.
			reqs := svc.requests()
			assert.Equal(t, "user:q2", render(reqs[2].Messages), "second run's first call")
			assert.Equal(t, "conv-1", reqs[2].ConversationID, "second run's first call")
			assert.Len(t, logs.warnings(), tc.wantWarnings, "warnings")
		})
	}
}

func TestAgentPerCallServiceEdgeCases(t *testing.T) {
	ctx := context.Background()
	t.Run("existing service conversation resumes", func(t *testing.T) {
		svc := &fakeService{stores: true}
		svc.convs = map[string][]abi.Message{"conv-9": {abi.NewMessage(abi.RoleUser, "earlier"), abi.NewMessage(abi.RoleAssistant, "ok")}}
		primary := NewMemoryProvider("primary")
		a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: true, Logger: (&logCapture{}).logger()})
		require.NoError(t, err)
		s := session.New()
		s.ServiceSessionID = "conv-9"
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
		require.NoError(t, err)
		require.Equal(t, "conv-9", s.ServiceSessionID, "service session id")
		require.Equal(t, "conv-9", svc.requests()[0].ConversationID, "first call")
		require.Equal(t, "user:q call:c1 result:c1 asst:answer to c1", stored(t, primary, s))
	})
	t.Run("store false cannot continue a service conversation", func(t *testing.T) {
		a, err := New(Config{Model: (&fakeService{}).client(), Providers: []ProviderConfig{{Provider: NewMemoryProvider("p")}}, RequirePerServiceCallPersistence: true})
		require.NoError(t, err)
		s := session.New()
		s.ServiceSessionID = "conv-9"
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, &RunOptions{Store: new(false)})
		require.ErrorIs(t, err, ErrHistoryConflict)
	})
	t.Run("storing service that returns no id is reported", func(t *testing.T) {
		logs := &logCapture{}
		svc := &fakeService{stores: true, noID: true}
		primary := NewMemoryProvider("primary")
		a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{Audit(primary)}, RequirePerServiceCallPersistence: true, Logger: logs.logger()})
		require.NoError(t, err)
		s := session.New()
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
		require.NoError(t, err)
		// Without an id the loop has to send the whole conversation.
		assert.Equal(t, "user:q call:c1 result:c1", render(svc.requests()[1].Messages))
		if w := logs.warnings(); assert.Len(t, w, 1, "warnings") {
			assert.Contains(t, w[0], "no conversation id")
		}
		assert.Equal(t, "user:q call:c1 result:c1 asst:answer to c1", stored(t, primary, s))
	})
	t.Run("no providers: service id still committed per call", func(t *testing.T) {
		svc := &fakeService{stores: true}
		var revisions []int64
		a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, RequirePerServiceCallPersistence: true, Saver: saverFunc(func(_ context.Context, s *session.Session) error {
			revisions = append(revisions, s.Revision)
			if s.ServiceSessionID != "conv-1" {
				return fmt.Errorf("committed without the service id: %q", s.ServiceSessionID)
			}
			return nil
		})})
		require.NoError(t, err)
		s := session.New()
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{1, 2}, revisions, "revisions committed")
		require.Equal(t, int64(2), s.Revision, "session revision")
	})
}

type saverFunc func(context.Context, *session.Session) error

func (f saverFunc) Save(ctx context.Context, s *session.Session) error { return f(ctx, s) }

// wrappedClient is a caller's own stack layer.
type wrappedClient struct {
	model.Client
	calls atomic.Int32
}

func (w *wrappedClient) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	w.calls.Add(1)
	return w.Client.Complete(ctx, req)
}

func TestAgentUseClientAsIs(t *testing.T) {
	ctx := context.Background()
	t.Run("without the middleware: warned, caller's job", func(t *testing.T) {
		logs := &logCapture{}
		primary := NewMemoryProvider("primary")
		svc := &fakeService{}
		stack := &wrappedClient{Client: svc.client()}
		a, err := New(Config{Model: stack, Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: true, UseClientAsIs: true, Logger: logs.logger()})
		require.NoError(t, err)
		w := logs.warnings()
		require.Len(t, w, 1, "warnings")
		require.Contains(t, w[0], "PersistPerServiceCall")
		s := session.New()
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
		require.NoError(t, err)
		require.Equal(t, "", stored(t, primary, s))
		require.Equal(t, int32(2), stack.calls.Load(), "calls through the caller's stack")
	})
	t.Run("with the middleware: per-call persistence", func(t *testing.T) {
		logs := &logCapture{}
		primary := NewMemoryProvider("primary")
		svc := &fakeService{}
		stack := &wrappedClient{Client: PersistPerServiceCall(svc.client())}
		stackU := unwrapping{stack}
		var persisted []string
		svc.observe = func(model.Request) {}
		a, err := New(Config{Model: stackU, Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: true, UseClientAsIs: true, Logger: logs.logger(),
			Saver: saverFunc(func(_ context.Context, s *session.Session) error {
				persisted = append(persisted, stored(t, primary, s))
				return nil
			})})
		require.NoError(t, err)
		require.Empty(t, logs.warnings(), "warnings")
		s := session.New()
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"user:q call:c1", "user:q call:c1 result:c1 asst:answer to c1"}, persisted, "commits")
	})
	t.Run("per-run with the stack as is", func(t *testing.T) {
		primary := NewMemoryProvider("primary")
		svc := &fakeService{}
		a, err := New(Config{Model: &wrappedClient{Client: svc.client()}, Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, UseClientAsIs: true})
		require.NoError(t, err)
		s := session.New()
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
		require.NoError(t, err)
		require.Equal(t, "user:q call:c1 result:c1 asst:answer to c1", stored(t, primary, s))
	})
}

// unwrapping exposes the layer below, so the agent can find the middleware.
type unwrapping struct{ *wrappedClient }

func (u unwrapping) Unwrap() model.Client { return u.wrappedClient.Client }

func TestAgentSaverFailureLeavesSessionUnchanged(t *testing.T) {
	svc := &fakeService{reply: func(int, []abi.Message) abi.Message { return abi.NewMessage(abi.RoleAssistant, "a") }}
	errDisk := errors.New("disk full")
	a, err := New(Config{Model: svc.client(), Providers: []ProviderConfig{{Provider: NewMemoryProvider("p")}},
		Saver: saverFunc(func(context.Context, *session.Session) error { return errDisk })})
	require.NoError(t, err)
	s := session.New()
	before := mustJSON(t, s)
	_, err = a.Run(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
	require.ErrorIs(t, err, errDisk)
	require.Equal(t, before, mustJSON(t, s), "session changed although saving failed")
}

// TestAgentRefusesCommitPastMaxRevision: a session at the largest revision
// fails its next commit with a clear error (never a stale revision after
// an overflow) and stays as it was.
func TestAgentRefusesCommitPastMaxRevision(t *testing.T) {
	svc := &fakeService{reply: func(int, []abi.Message) abi.Message { return abi.NewMessage(abi.RoleAssistant, "a") }}
	var saved []int64
	a, err := New(Config{Model: svc.client(), Providers: []ProviderConfig{{Provider: NewMemoryProvider("p")}},
		Saver: saverFunc(func(_ context.Context, s *session.Session) error { saved = append(saved, s.Revision); return nil })})
	require.NoError(t, err)
	s := session.New()
	s.Revision = session.MaxRevision
	before := mustJSON(t, s)
	_, err = a.Run(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, "q")}, nil)
	require.ErrorIs(t, err, session.ErrRevisionExhausted)
	require.NotErrorIs(t, err, session.ErrStaleRevision)
	require.Empty(t, saved, "nothing is saved")
	require.Equal(t, before, mustJSON(t, s), "the session is unchanged")
}
