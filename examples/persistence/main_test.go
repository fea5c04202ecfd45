package main

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func Test_main(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	runErr := run(context.Background())
	w.Close()
	os.Stdout = stdout
	got := string(<-done)
	require.NoError(t, runErr)
	const want = `== per-run
  commit rev 1: user call result answer
  answer: Oslo: clear skies.
  stored: user call result answer
== per-run, second model call fails
  run failed: agent: run: model call 2: model unavailable
  stored: (nothing)
== per-service-call
  commit rev 1: user call
  commit rev 2: user call result answer
  answer: Oslo: clear skies.
  stored: user call result answer
== per-service-call, second model call fails
  commit rev 1: user call
  commit rev 2: user call
  run failed: agent: run: model call 2: model unavailable
  stored: user call
`
	require.Equal(t, want, got)
}
