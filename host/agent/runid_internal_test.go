package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
)

// A repeated run returns what the run returned, in every persistence mode
// and streamed or not, with no model call and no change to the session:
// per run the reply is recorded once at the end, per service call it is
// built up by each call's commit.
func TestRunIDReplaysTheReply(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		for _, perCall := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v/per-call=%v", streaming, perCall), func(t *testing.T) {
				ctx := context.Background()
				primary := NewMemoryProvider("primary")
				svc := &fakeService{}
				a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: perCall})
				require.NoError(t, err)
				s := session.New()
				r1, err := runAgent(ctx, t, a, s, streaming, "q1", &RunOptions{RunID: "r1"})
				require.NoError(t, err)
				require.Equal(t, "call:c1 result:c1 asst:answer to c1", render(r1.Messages))
				_, err = runAgent(ctx, t, a, s, streaming, "q2", &RunOptions{RunID: "r2"})
				require.NoError(t, err)
				before, calls := mustJSON(t, s), svc.calls

				again, err := runAgent(ctx, t, a, s, streaming, "q1", &RunOptions{RunID: "r1"})
				require.NoError(t, err)
				assert.Equal(t, render(r1.Messages), render(again.Messages), "r1's reply")
				assert.Equal(t, !streaming, again.Replayed)
				assert.Equal(t, calls, svc.calls, "a replay calls no model")
				assert.Equal(t, before, mustJSON(t, s), "a replay changes nothing")

				_, err = runAgent(ctx, t, a, s, streaming, "q3", &RunOptions{RunID: "r1"})
				require.ErrorIs(t, err, ErrRunIDReused)
				assert.Equal(t, calls, svc.calls, "a refused run calls no model")
				assert.Equal(t, before, mustJSON(t, s), "a refused run changes nothing")
			})
		}
	}
}

// A run that stopped before it finished (per service call, a model call
// failed after an earlier one committed) goes on when repeated: it answers
// the calls it left open and calls the model, without storing its input
// again; repeated once more, it returns what it returned in all. Once the
// conversation moved on, a repeat returns what the run had committed.
func TestRunIDContinuesARunThatStopped(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", streaming), func(t *testing.T) {
			ctx := context.Background()
			primary := NewMemoryProvider("primary")
			svc := &fakeService{failAt: 4}
			a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: true})
			require.NoError(t, err)
			s := session.New()
			_, err = runAgent(ctx, t, a, s, streaming, "q0", &RunOptions{RunID: "r1"})
			require.NoError(t, err)
			_, err = runAgent(ctx, t, a, s, streaming, "q1", &RunOptions{RunID: "r2"})
			require.ErrorIs(t, err, errServiceDown)
			require.Len(t, s.PendingToolCalls, 1)
			require.True(t, s.FindRun("r2").Partial)

			res, err := runAgent(ctx, t, a, s, streaming, "q1", &RunOptions{RunID: "r2"})
			require.NoError(t, err)
			assert.False(t, res.Replayed, "the run stopped before it finished: it goes on")
			if !streaming {
				require.Len(t, res.Resumed, 1)
				assert.Equal(t, "call:c2 asst:answer to c2", render(res.Messages), "what the run returned, before and after it stopped")
			}
			assert.Empty(t, s.PendingToolCalls)
			assert.Equal(t, "user:q0 call:c1 result:c1 asst:answer to c1 user:q1 call:c2 result:c2 asst:answer to c2", stored(t, primary, s), "the input once")
			assert.False(t, s.FindRun("r2").Partial)

			again, err := runAgent(ctx, t, a, s, streaming, "q1", &RunOptions{RunID: "r2"})
			require.NoError(t, err)
			assert.Equal(t, !streaming, again.Replayed)
			assert.Equal(t, "call:c2 asst:answer to c2", render(again.Messages))
			assert.Equal(t, "user:q0 call:c1 result:c1 asst:answer to c1 user:q1 call:c2 result:c2 asst:answer to c2", stored(t, primary, s))
		})
	}
}

// A run that stopped is answered with what it committed once a later run
// closed the calls it left open: the conversation went on without it.
func TestRunIDReplaysAStoppedRunAfterTheConversationMovedOn(t *testing.T) {
	ctx := context.Background()
	primary := NewMemoryProvider("primary")
	svc := &fakeService{failAt: 2}
	a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: true})
	require.NoError(t, err)
	s := session.New()
	_, err = runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r1"})
	require.ErrorIs(t, err, errServiceDown)
	_, err = runAgent(ctx, t, a, s, false, "q2", &RunOptions{RunID: "r2"})
	require.NoError(t, err)
	before, calls := mustJSON(t, s), svc.calls

	res, err := runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r1"})
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, "call:c1", render(res.Messages), "what r1 committed")
	assert.Equal(t, calls, svc.calls)
	assert.Equal(t, before, mustJSON(t, s))
}

// A recorded reply is checked against the message schema when it is
// returned: a session edited to hold another role is refused as invalid,
// saying where, and nothing runs.
func TestRunIDRefusesAnInvalidRecordedReply(t *testing.T) {
	ctx := context.Background()
	svc := &fakeService{}
	a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: NewMemoryProvider("primary")}}})
	require.NoError(t, err)
	s := session.New()
	_, err = runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r1"})
	require.NoError(t, err)
	rec := *s.FindRun("r1")
	rec.Reply = json.RawMessage(`[{"role":"robot","contents":[]}]`)
	s.RecordRun(rec)
	calls := svc.calls
	_, err = runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r1"})
	require.ErrorIs(t, err, session.ErrInvalid)
	assert.ErrorContains(t, err, `run "r1": `)
	assert.ErrorContains(t, err, "message 0")
	assert.Equal(t, calls, svc.calls)
}

// A run that finished with calls left open (per run, the service keeps the
// conversation, a tool ended the loop) is answered from the window when
// repeated: it finished, and the next new run answers the calls.
func TestRunIDReplaysAFinishedRunWithOpenCalls(t *testing.T) {
	ctx := context.Background()
	stop := Tool{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`), Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
		TerminateLoop(ctx)
		return "stopped", nil
	}}
	primary := NewMemoryProvider("primary")
	svc := &fakeService{stores: true}
	a, err := New(Config{Model: svc.client(), Tools: []Tool{stop}, Providers: []ProviderConfig{{Provider: primary, SkipLoad: true}}})
	require.NoError(t, err)
	s := session.New()
	first, err := runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r1"})
	require.NoError(t, err)
	require.True(t, first.Terminated)
	require.Len(t, s.PendingToolCalls, 1, "the service holds the call unanswered")
	before, calls := mustJSON(t, s), svc.calls

	again, err := runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r1"})
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, render(first.Messages), render(again.Messages))
	assert.Equal(t, calls, svc.calls)
	assert.Equal(t, before, mustJSON(t, s))
}
