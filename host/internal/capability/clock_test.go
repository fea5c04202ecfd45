package capability

import (
	"context"
	"runtime"
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

// TestCallFollowsTheClockWithoutGoroutines: context.AfterFunc and
// context.WithTimeout on a call's context over a clock, under a further
// value, register with the clock rather than start a goroutine each
// (through context.WithValue each started one), and still run when the
// clock ends.
func TestCallFollowsTheClockWithoutGoroutines(t *testing.T) {
	clockCtx, cancel := WithClock(context.Background(), time.Hour)
	ctx := WithValue(WithCall(clockCtx, &Call{}), testKey{}, "v")
	require.NotNil(t, FromContext(ctx))
	assert.Equal(t, "v", ctx.Value(testKey{}))
	before := runtime.NumGoroutine()
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { close(fired) })
	child, cancelChild := context.WithTimeout(ctx, time.Hour)
	defer cancelChild()
	assert.Equal(t, before, runtime.NumGoroutine(), "a goroutine started to follow the clock")
	assert.True(t, context.AfterFunc(ctx, func() {})(), "a registered function is stopped before it runs")

	cancel()
	waitDone(t, child, 50*tick)
	assert.ErrorIs(t, child.Err(), context.Canceled, "a derived context ends with the clock")
	select {
	case <-fired:
	case <-time.After(50 * tick):
		require.FailNow(t, "the function did not run when the clock ended")
	}
	assert.False(t, stop(), "the function had run")

	// Without a clock the call's context is a plain value carrier.
	plain := WithCall(context.Background(), &Call{})
	_, isFollowing := plain.(afterFuncer)
	assert.False(t, isFollowing)
}
