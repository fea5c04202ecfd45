package portable_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/portable"
)

// TestReaderStopsWithItsContext: once a Reader's context ends, its next
// read fails with the context's cause, located, and not as a fault of the
// document; every later read fails the same way; a Reader whose context
// ended before it read fails at once likewise. (A check the context ends
// while it runs: TestValidateStopsMidCheck.)
func TestReaderStopsWithItsContext(t *testing.T) {
	doc := export(t, demoSession(), map[string][]abi.Message{"history": turns(3, 10)})
	ctx, cancel := context.WithCancel(context.Background())
	r, err := portable.NewReaderContext(ctx, bytes.NewReader(doc), portable.Limits{})
	require.NoError(t, err)
	cancel()
	var first error
	var failed *portable.SlotReader
slots:
	for sr, err := range r.Slots() {
		if err != nil {
			first = err
			break
		}
		for _, err := range sr.Messages() {
			if err != nil {
				first, failed = err, sr
				break slots
			}
		}
	}
	require.Error(t, first, "the document was read after the context ended")
	require.NotNil(t, failed, "the messages' reads did not fail")
	for _, err := range failed.Messages() {
		assert.Equal(t, first, err, "a slot read again fails the same way")
		break
	}
	require.ErrorIs(t, first, context.Canceled)
	assert.NotErrorIs(t, first, portable.ErrInvalidMessage, "a read the context stopped says nothing of the message")
	assert.Contains(t, first.Error(), `slot "history", message 0`)
	assert.Contains(t, first.Error(), "reading stopped")
	for _, err := range r.Slots() {
		assert.Equal(t, first, err, "the slots read again fail the same way")
		break
	}

	_, err = portable.NewReaderContext(ctx, bytes.NewReader(doc), portable.Limits{})
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, portable.ErrMalformed)
}

// TestReadOpenAIStopsWithItsContext: the same for an OpenAI messages array.
func TestReadOpenAIStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := errors.New("the array read to its end")
	for _, e := range portable.ReadOpenAIContext(ctx, strings.NewReader(`[{"role":"user","content":"hi"}]`), portable.Limits{}) {
		if e != nil {
			err = e
			break
		}
	}
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, portable.ErrInvalidMessage)
	assert.Contains(t, err.Error(), "message 0")
}
