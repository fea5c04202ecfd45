package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// Test_main follows the quickstart (../README.md): the plugin it shows is
// this one, its wasm build passes `wasmhist conformance` with exactly the
// table the README prints, and it remembers across processes.
func Test_main(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	// Not require.Contains: its message would print the whole README.
	require.True(t, strings.Contains(string(readme), "```go\n"+string(src)+"```"),
		"README.md does not show main.go as it is: copy main.go into the README's ```go block")

	wasm := sdktest.BuildPlugin(t, "github.com/wasmhist/wasmhist/examples/quickstart/plugin")
	dir := t.TempDir()
	wasmhist := filepath.Join(dir, "wasmhist")
	out, err := exec.Command(goTool(), "build", "-o", wasmhist, "github.com/wasmhist/wasmhist/host/cmd/wasmhist").CombinedOutput()
	require.NoError(t, err, "building wasmhist:\n%s", out)
	local := filepath.Join(dir, "recent.wasm")
	b, err := os.ReadFile(wasm)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(local, b, 0o644))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), wasmhist, args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		require.NoError(t, err, "wasmhist %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}

	conformance := run("conformance", "recent.wasm")
	assert.True(t, strings.HasPrefix(conformance, "conformance of recent 0.1.0 (sha256 "), "conformance header:\n%s", conformance)
	_, table, _ := strings.Cut(conformance, "\n\n")
	assert.True(t, strings.Contains(string(readme), table), "README.md's conformance table differs from the real one; paste this:\n%s", table)
	assert.True(t, strings.HasSuffix(table, "12 cases: 10 passed, 0 failed, 2 skipped\n"), "the quickstart plugin must pass every case:\n%s", conformance)

	run("chat", "--plugin", "./recent.wasm", "--session", "chat.json", "-m", "I like Italian food")
	assert.Contains(t, run("chat", "--plugin", "./recent.wasm", "--session", "chat.json", "-m", "What food do I like?"),
		"assistant: You told me you like Italian food.", "a new process did not remember")
	assert.Contains(t, run("history", "--plugin", "./recent.wasm", "--session", "chat.json"), "4 messages",
		"history through the plugin's list export")
}

// TestConformanceNative runs the suite on the plugin's Go code in process,
// as README.md's last step suggests.
func TestConformanceNative(t *testing.T) {
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
		return h.LoadNative(ctx, "recent", sdk.Handler(provider{}), host.LoadOptions{})
	})
}

// goTool is the go command; go test puts the running toolchain's bin
// directory first in PATH, so this is the toolchain running the test.
func goTool() string { return "go" }

// TestListPastTheEnd: a cursor at or past the end of the history (one
// issued before a clear, say) is an empty last page, not an error (SPEC
// section 4.4); a cursor that is not an index is invalid_argument.
func TestListPastTheEnd(t *testing.T) {
	state := []byte(`{"messages":[{"role":"user"},{"role":"assistant"}]}`)
	for _, cursor := range []string{"2", "3", "1000"} {
		resp, err := provider{}.List(t.Context(), &abi.ListRequest{State: state, Cursor: cursor, Limit: 1})
		require.NoError(t, err, "cursor %s", cursor)
		assert.Empty(t, resp.Messages, "cursor %s", cursor)
		assert.Empty(t, resp.NextCursor, "cursor %s", cursor)
	}
	_, err := provider{}.List(t.Context(), &abi.ListRequest{State: state, Cursor: "x"})
	require.ErrorIs(t, err, abi.ErrInvalidArgument)
}
