package portable

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateStopsMidCheck: a check of a message that takes seconds (a
// valid message of 300,000 parts, about 9 s here) stops soon after the
// Reader's context ends while it runs, with the context's cause.
func TestValidateStopsMidCheck(t *testing.T) {
	const parts = 300_000
	raw := []byte(`{"role":"user","contents":[` + strings.Repeat(`{"type":"text","text":"x"},`, parts-1) + `{"type":"text","text":"x"}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	r := newReader(ctx, strings.NewReader(""), Limits{})
	cancelled := make(chan time.Time, 1)
	time.AfterFunc(300*time.Millisecond, func() {
		cancelled <- time.Now()
		cancel()
	})
	err := r.validate(messageSchema(), raw, func(err error) error { return errors.Join(ErrInvalidMessage, err) })
	returned := time.Now()
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, ErrInvalidMessage)
	select {
	case at := <-cancelled:
		// Unstopped, the check runs on for seconds (more under the race
		// detector).
		assert.Less(t, returned.Sub(at), 2*time.Second, "the check ran on past its context")
	default:
		t.Fatal("the check returned before its context ended: it is too short to test the stop")
	}
}
