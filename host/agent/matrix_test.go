package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/host/agent/model"
)

// callObservation is what the test saw at the start of one model call.
type callObservation struct {
	persisted string // the primary provider's history in the caller's session
	serviceID string // the caller's session's ServiceSessionID
	sent      string // the messages that reached the model
	convID    string // the conversation id that reached the model
	store     *bool
}

// TestAgentScenarioMatrix runs two turns (each: user message, tool call,
// tool result, answer) for every combination of streaming, a service that
// keeps conversations by default, per-service-call persistence and the
// store option, and checks what was persisted before each model call and
// after each turn, what reached the model, and the service session id.
func TestAgentScenarioMatrix(t *testing.T) {
	type turnWant struct {
		calls     []callObservation // persisted, serviceID, sent, convID per call
		persisted string
		serviceID string
		revision  int64
	}
	const (
		turn1Stored = "user:q1 call:c1 result:c1 asst:answer to c1"
		turn2Stored = turn1Stored + " user:q2 call:c2 result:c2 asst:answer to c2"
	)
	// Expectations depend on the mode and on whether the service ends up
	// keeping the conversation (the store option, or its default).
	perRunLocal := []turnWant{
		{calls: []callObservation{
			{persisted: "", sent: "user:q1"},
			{persisted: "", sent: "user:q1 call:c1 result:c1"},
		}, persisted: turn1Stored, revision: 1},
		{calls: []callObservation{
			{persisted: turn1Stored, sent: turn1Stored + " user:q2"},
			{persisted: turn1Stored, sent: turn1Stored + " user:q2 call:c2 result:c2"},
		}, persisted: turn2Stored, revision: 2},
	}
	perCallLocal := []turnWant{
		{calls: []callObservation{
			{persisted: "", sent: "user:q1"},
			// The first call is stored before the second one starts, and
			// the history reaches the model although the loop sent only the
			// tool result under the sentinel.
			{persisted: "user:q1 call:c1", sent: "user:q1 call:c1 result:c1"},
		}, persisted: turn1Stored, revision: 2},
		{calls: []callObservation{
			{persisted: turn1Stored, sent: turn1Stored + " user:q2"},
			{persisted: turn1Stored + " user:q2 call:c2", sent: turn1Stored + " user:q2 call:c2 result:c2"},
		}, persisted: turn2Stored, revision: 4},
	}
	perCallService := []turnWant{
		{calls: []callObservation{
			{persisted: "", sent: "user:q1"},
			{persisted: "user:q1 call:c1", serviceID: "conv-1", sent: "result:c1", convID: "conv-1"},
		}, persisted: turn1Stored, serviceID: "conv-1", revision: 2},
		{calls: []callObservation{
			// The service holds the history: nothing is loaded.
			{persisted: turn1Stored, serviceID: "conv-1", sent: "user:q2", convID: "conv-1"},
			{persisted: turn1Stored + " user:q2 call:c2", serviceID: "conv-1", sent: "result:c2", convID: "conv-1"},
		}, persisted: turn2Stored, serviceID: "conv-1", revision: 4},
	}

	stores := []struct {
		name string
		v    *bool
	}{{"store unset", nil}, {"store true", model.Bool(true)}, {"store false", model.Bool(false)}}
	for _, streaming := range []bool{false, true} {
		for _, serviceStores := range []bool{false, true} {
			for _, perCall := range []bool{false, true} {
				for _, st := range stores {
					name := fmt.Sprintf("stream=%v/service-stores=%v/per-call=%v/%s", streaming, serviceStores, perCall, st.name)
					t.Run(name, func(t *testing.T) {
						ctx := context.Background()
						keeps := serviceStores
						if st.v != nil {
							keeps = *st.v
						}
						primary := NewMemoryProvider("primary")
						logs := &logCapture{}
						svc := &fakeService{stores: serviceStores}
						s := session.New()
						var seen []callObservation
						svc.observe = func(req model.Request) {
							seen = append(seen, callObservation{
								persisted: stored(t, primary, s),
								serviceID: s.ServiceSessionID,
								sent:      render(req.Messages),
								convID:    req.ConversationID,
								store:     req.Store,
							})
						}
						a, err := New(Config{
							Model:                            svc.client(),
							Tools:                            []Tool{lookupTool()},
							Providers:                        []ProviderConfig{{Provider: primary}},
							Store:                            st.v,
							RequirePerServiceCallPersistence: perCall,
							Logger:                           logs.logger(),
						})
						require.NoError(t, err)

						if !perCall && keeps {
							// Per-run persistence with a service that keeps
							// the conversation and a provider that loads:
							// the default conflict mode refuses, atomically.
							before := mustJSON(t, s)
							_, err := runAgent(ctx, t, a, s, streaming, "q1", nil)
							require.ErrorIs(t, err, ErrHistoryConflict)
							if after := mustJSON(t, s); after != before {
								t.Fatalf("failed run changed the session:\n%s\n%s", before, after)
							}
							if len(seen) != 1 || seen[0].sent != "user:q1" || seen[0].store != st.v {
								t.Fatalf("model calls = %+v, want one call with user:q1", seen)
							}
							return
						}

						want := perRunLocal
						switch {
						case perCall && keeps:
							want = perCallService
						case perCall:
							want = perCallLocal
						}
						for turn, tw := range want {
							seen = nil
							res, err := runAgent(ctx, t, a, s, streaming, fmt.Sprintf("q%d", turn+1), nil)
							if err != nil {
								t.Fatalf("turn %d: %v", turn+1, err)
							}
							if got, w := render(res.Messages), fmt.Sprintf("call:c%d result:c%d asst:answer to c%d", turn+1, turn+1, turn+1); got != w {
								t.Errorf("turn %d: result messages %q, want %q", turn+1, got, w)
							}
							if len(seen) != len(tw.calls) {
								t.Fatalf("turn %d: %d model calls, want %d", turn+1, len(seen), len(tw.calls))
							}
							for i, w := range tw.calls {
								g := seen[i]
								if g.persisted != w.persisted {
									t.Errorf("turn %d call %d: persisted before the call\n got %q\nwant %q", turn+1, i+1, g.persisted, w.persisted)
								}
								if g.serviceID != w.serviceID {
									t.Errorf("turn %d call %d: service session id before the call %q, want %q", turn+1, i+1, g.serviceID, w.serviceID)
								}
								if g.sent != w.sent {
									t.Errorf("turn %d call %d: model got\n %q\nwant %q", turn+1, i+1, g.sent, w.sent)
								}
								if g.convID != w.convID {
									t.Errorf("turn %d call %d: conversation id %q, want %q", turn+1, i+1, g.convID, w.convID)
								}
								if (g.store == nil) != (st.v == nil) || (g.store != nil && *g.store != *st.v) {
									t.Errorf("turn %d call %d: store forwarded as %v, want %v", turn+1, i+1, g.store, st.v)
								}
							}
							assert.Equal(t, tw.persisted, stored(t, primary, s))
							if s.ServiceSessionID != tw.serviceID {
								t.Errorf("turn %d: service session id %q, want %q", turn+1, s.ServiceSessionID, tw.serviceID)
							}
							if s.Revision != tw.revision {
								t.Errorf("turn %d: revision %d, want %d", turn+1, s.Revision, tw.revision)
							}
						}
						// Loading skipped because the service keeps the
						// conversation is reported once, not every turn.
						wantWarnings := 0
						if perCall && keeps {
							wantWarnings = 1
						}
						if w := logs.warnings(); len(w) != wantWarnings {
							t.Errorf("warnings %q, want %d", w, wantWarnings)
						}
					})
				}
			}
		}
	}
}
