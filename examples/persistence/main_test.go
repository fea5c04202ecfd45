package main

import (
	"context"
	"io"
	"os"
	"testing"
)

func Test_main(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
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
	if runErr != nil {
		t.Fatal(runErr)
	}
	const want = `== per-run
  commit rev 1: user call result answer
  answer: Oslo: clear skies.
  stored: user call result answer
== per-run, second model call fails
  run failed: host: run: model call 2: model unavailable
  stored: (nothing)
== per-service-call
  commit rev 1: user call
  commit rev 2: user call result answer
  answer: Oslo: clear skies.
  stored: user call result answer
== per-service-call, second model call fails
  commit rev 1: user call
  run failed: host: run: model call 2: model unavailable
  stored: user call
`
	if got != want {
		t.Fatalf("output:\n%s\nwant:\n%s", got, want)
	}
}
