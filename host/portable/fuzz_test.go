package portable_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/portable"
)

// fuzzLimits are small so that the fuzzer reaches them.
var fuzzLimits = portable.Limits{MaxMessageBytes: 2048, MaxSessionBytes: 4096}

// FuzzReader: whatever the input, the Reader does not panic, refuses with
// an *Error wrapping one of its sentinels, and never buffers more than its
// Limits allow ahead of what it consumed.
func FuzzReader(f *testing.F) {
	f.Add(export(f, demoSession(), map[string][]abi.Message{"history": turns(6, 3), "audit": turns(2, 0)}))
	f.Add([]byte(head + `],"totals":{"slots":0,"messages":0}}`))
	for _, dir := range []string{"testdata", "testdata/invalid"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, name := range files {
			b, err := os.ReadFile(name)
			require.NoError(f, err)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		r, err := portable.NewReader(bytes.NewReader(doc), fuzzLimits)
		if err == nil {
			err = drain(r)
			require.LessOrEqual(t, r.PeakReadAhead(), max(fuzzLimits.MaxMessageBytes, fuzzLimits.MaxSessionBytes))
		}
		if err != nil {
			checkTyped(t, err)
		}
		for _, err := range portable.ReadOpenAI(bytes.NewReader(doc), fuzzLimits) {
			if err != nil {
				checkTyped(t, err)
			}
		}
	})
}

func drain(r *portable.Reader) error {
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
	return nil
}

func checkTyped(t *testing.T, err error) {
	t.Helper()
	var pe *portable.Error
	require.ErrorAs(t, err, &pe)
	for _, s := range []error{portable.ErrMalformed, portable.ErrVersion, portable.ErrInvalidMessage, portable.ErrTruncated, portable.ErrTooLarge, portable.ErrConvert} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("untyped error: %v", err)
}
