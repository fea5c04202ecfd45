package portable_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/portable"
)

// slowParts is how many parts the slow message has: checking it against
// schemas/message.json takes seconds (about 40 µs a part here).
const slowParts = 300_000

// slowMessage is a valid message of n text parts, as JSON.
func slowMessage(n int) string {
	return `{"role":"user","contents":[` + strings.Repeat(`{"type":"text","text":"x"},`, n-1) + `{"type":"text","text":"x"}]}`
}

// TestReaderStopsWithItsContext: a Reader whose context ends while it
// checks a message stops within a fraction of the check's time, with the
// context's cause, located, and not as a fault of the document; one whose
// context ended before it read stops at once likewise.
func TestReaderStopsWithItsContext(t *testing.T) {
	small := abi.Message{Role: abi.RoleUser, Contents: []abi.Content{abi.Text("SLOW")}}
	s := demoSession()
	doc := export(t, s, map[string][]abi.Message{"history": {small}})
	doc = bytes.Replace(doc, []byte(`{"role":"user","contents":[{"type":"text","text":"SLOW"}]}`), []byte(slowMessage(slowParts)), 1)
	require.Contains(t, string(doc), `"text":"x"}]}`, "the small message was replaced")
	lim := portable.Limits{MaxMessageBytes: 64 << 20}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r, err := portable.NewReaderContext(ctx, bytes.NewReader(doc), lim)
	require.NoError(t, err)
	start := time.Now()
	err = readSlots(r)
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, portable.ErrInvalidMessage, "a check the context stopped says nothing of the message")
	assert.Contains(t, err.Error(), `slot "history", message 0`)
	assert.Contains(t, err.Error(), "reading stopped")
	// Unstopped, the check takes seconds (more under the race detector).
	assert.Less(t, took, 3*time.Second, "the check ran on past its context")

	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	_, err = portable.NewReaderContext(done, bytes.NewReader(doc), lim)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, portable.ErrMalformed)
}

// TestReadOpenAIStopsWithItsContext: the same for an OpenAI messages array:
// the message, valid, would be read whole past its context. (Decoding it
// into the OpenAI library's types, before the check, is not bounded by
// the context, only by the message's size: no time is asserted.)
func TestReadOpenAIStopsWithItsContext(t *testing.T) {
	doc := `[` + strings.Replace(slowMessage(slowParts/10), `"contents"`, `"content"`, 1) + `]`
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := errors.New("the array read to its end")
	for _, e := range portable.ReadOpenAIContext(ctx, strings.NewReader(doc), portable.Limits{MaxMessageBytes: 64 << 20}) {
		if e != nil {
			err = e
			break
		}
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, portable.ErrInvalidMessage)
	assert.Contains(t, err.Error(), "message 0")
}

// readSlots reads every slot's messages, and returns the first error.
func readSlots(r *portable.Reader) error {
	for sr, err := range r.Slots() {
		if err != nil {
			return err
		}
		for _, err := range sr.Messages() {
			if err != nil {
				return err
			}
		}
	}
	return errors.New("the document read to its end")
}
