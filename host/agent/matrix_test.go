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
							require.Equal(t, before, mustJSON(t, s), "failed run changed the session")
							require.Len(t, seen, 1, "model calls")
							require.Equal(t, "user:q1", seen[0].sent)
							require.Equal(t, st.v, seen[0].store, "store forwarded")
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
							require.NoError(t, err, "turn %d", turn+1)
							assert.Equal(t, fmt.Sprintf("call:c%d result:c%d asst:answer to c%d", turn+1, turn+1, turn+1), render(res.Messages), "turn %d: result messages", turn+1)
							require.Len(t, seen, len(tw.calls), "turn %d: model calls", turn+1)
							for i, w := range tw.calls {
								g := seen[i]
								assert.Equal(t, w.persisted, g.persisted, "turn %d call %d: persisted before the call", turn+1, i+1)
								assert.Equal(t, w.serviceID, g.serviceID, "turn %d call %d: service session id before the call", turn+1, i+1)
								assert.Equal(t, w.sent, g.sent, "turn %d call %d: what the model got", turn+1, i+1)
								assert.Equal(t, w.convID, g.convID, "turn %d call %d: conversation id", turn+1, i+1)
								assert.Equal(t, st.v, g.store, "turn %d call %d: store forwarded", turn+1, i+1)
							}
							assert.Equal(t, tw.persisted, stored(t, primary, s))
							assert.Equal(t, tw.serviceID, s.ServiceSessionID, "turn %d: service session id", turn+1)
							assert.Equal(t, tw.revision, s.Revision, "turn %d: revision", turn+1)
						}
						// Loading skipped because the service keeps the
						// conversation is reported once, not every turn.
						wantWarnings := 0
						if perCall && keeps {
							wantWarnings = 1
						}
						assert.Len(t, logs.warnings(), wantWarnings, "warnings")
					})
				}
			}
		}
	}
}
