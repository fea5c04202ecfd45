package capability

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tick = 40 * time.Millisecond

type testKey struct{}

// waitDone waits for ctx to end and returns when, failing past limit.
func waitDone(t *testing.T, ctx context.Context, limit time.Duration) time.Time {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Now()
	case <-time.After(limit):
		require.FailNow(t, "the clock did not end")
	}
	return time.Time{}
}

func TestClockEndsAtItsDeadline(t *testing.T) {
	start := time.Now()
	ctx, cancel := WithClock(context.Background(), tick)
	defer cancel()
	end := waitDone(t, ctx, 50*tick)
	assert.GreaterOrEqual(t, end.Sub(start), tick)
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
}

// TestClockStandsStillWhilePaused: a pause of three deadlines neither ends
// the clock nor shortens what was left.
func TestClockStandsStillWhilePaused(t *testing.T) {
	ctx, cancel := WithClock(context.Background(), 2*tick)
	defer cancel()
	derived, cancelDerived := context.WithCancel(context.WithValue(ctx, testKey{}, 1))
	defer cancelDerived()
	fired := make(chan struct{})
	context.AfterFunc(ctx, func() { close(fired) })

	resume := Pause(derived) // found through derived contexts
	inner := Pause(ctx)      // pauses nest
	time.Sleep(3 * tick)     // the host's wait, not synchronisation
	inner()
	require.NoError(t, ctx.Err(), "the clock ran while paused")
	resumed := time.Now()
	resume()
	resume() // idempotent
	end := waitDone(t, ctx, 50*tick)
	assert.GreaterOrEqual(t, end.Sub(resumed), tick, "the pause shortened what was left")
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	waitDone(t, derived, 50*tick)
	<-fired
}

func TestClockFollowsItsParent(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel := WithClock(parent, time.Hour)
	defer cancel()
	resume := Pause(ctx)
	defer resume()
	cancelParent()
	waitDone(t, ctx, 50*tick)
	assert.ErrorIs(t, ctx.Err(), context.Canceled, "a paused clock ends with its parent")
	resumeAfter := Pause(ctx) // a pause after the end does nothing
	resumeAfter()
}

func TestPauseWithoutClock(t *testing.T) {
	Pause(context.Background())()
}
