package main

import (
	"io"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// Test_main runs the example as `go run` would, with the plugin built
// from this repository, and checks everything it prints.
func Test_main(t *testing.T) {
	wasm := sdktest.BuildPlugin(t, "github.com/wasmhist/wasmhist/plugins/inmemory")
	got := captureStdout(t, func() {
		os.Args = []string{"embed", "-plugin", wasm}
		main()
	})
	// The size of the saved JSON follows the plugin's state layout, which
	// is not what this example shows.
	got = regexp.MustCompile(`saved the session: \d+ bytes`).ReplaceAllString(got, "saved the session: N bytes")
	const want = `loaded plugin inmemory 0.1.0
user: I like Italian food
assistant: Noted: you like Italian food. I'll remember that.
  (session revision 1)
user: What is 6*7?
  tool call: calculator {"expression":"6*7"}
assistant: 6*7 = 42.
  (session revision 2)
saved the session: N bytes of JSON
restored the session at revision 2
loaded plugin inmemory 0.1.0
user: What food do I like?
assistant: You told me you like Italian food.
  (session revision 3)
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
