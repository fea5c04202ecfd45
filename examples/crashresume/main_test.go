package main

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestMain lets the test binary be the example's child process: the
// example starts os.Executable(), which under go test is this binary.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Test_main runs the example: a child is killed during its tool call in
// each persistence mode, and the resume shows what each mode kept.
func Test_main(t *testing.T) {
	wasm := sdktest.BuildPlugin(t, "github.com/wasmhist/wasmhist/plugins/inmemory")
	got := captureStdout(t, func() {
		os.Args = []string{"crashresume", "-plugin", wasm}
		main()
	})
	const want = `== per-run persistence
  child: user: What is 6*7?
  child: tool started
  killed the child while its tool ran
  resume: no session was saved; the whole turn is lost
== per-service-call persistence
  child: user: What is 6*7?
  child: tool started
  killed the child while its tool ran
  resume: the session file is at revision 1, stored: user call
  user: Try again: what is 6*7?
  assistant: 6*7 = 42.
  now at revision 3, stored: user call result user call result answer
`
	require.Equal(t, want, got)
}

// captureStdout returns what f writes to os.Stdout.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	defer func() { os.Stdout = stdout }()
	f()
	w.Close()
	return string(<-done)
}
