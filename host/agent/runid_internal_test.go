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

// A run whose commit made the session's revision and left tool calls open
// (it failed between a call and its result) runs again when repeated, and
// answers them first; repeated once more, it returns what that run
// returned.
func TestRunIDRepeatsARunThatLeftCallsOpen(t *testing.T) {
	ctx := context.Background()
	primary := NewMemoryProvider("primary")
	svc := &fakeService{failAt: 4}
	a, err := New(Config{Model: svc.client(), Tools: []Tool{lookupTool()}, Providers: []ProviderConfig{{Provider: primary}}, RequirePerServiceCallPersistence: true})
	require.NoError(t, err)
	s := session.New()
	_, err = runAgent(ctx, t, a, s, false, "q0", &RunOptions{RunID: "r1"})
	require.NoError(t, err)
	_, err = runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r2"})
	require.ErrorIs(t, err, errServiceDown)
	require.Len(t, s.PendingToolCalls, 1)

	res, err := runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r2"})
	require.NoError(t, err)
	assert.False(t, res.Replayed, "the run left calls open: it runs again")
	require.Len(t, res.Resumed, 1)
	assert.Empty(t, s.PendingToolCalls)

	again, err := runAgent(ctx, t, a, s, false, "q1", &RunOptions{RunID: "r2"})
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, render(res.Messages), render(again.Messages))
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
