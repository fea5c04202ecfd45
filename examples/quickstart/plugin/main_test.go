package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// Test_main follows the quickstart (../README.md): the plugin it shows is
// this one, its wasm build passes `wasmhist conformance` with exactly the
// table the README prints, and it remembers across processes.
func Test_main(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(src)+"```") {
		t.Fatal("README.md does not show main.go as it is: copy main.go into the README's ```go block")
	}

	wasm := sdktest.BuildPlugin(t, "github.com/wasmhist/wasmhist/examples/quickstart/plugin")
	dir := t.TempDir()
	wasmhist := filepath.Join(dir, "wasmhist")
	if out, err := exec.Command(goTool(), "build", "-o", wasmhist, "github.com/wasmhist/wasmhist/host/cmd/wasmhist").CombinedOutput(); err != nil {
		t.Fatalf("building wasmhist: %v\n%s", err, out)
	}
	local := filepath.Join(dir, "recent.wasm")
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), wasmhist, args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("wasmhist %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	out := run("conformance", "recent.wasm")
	if !strings.HasPrefix(out, "conformance of recent 0.1.0 (sha256 ") {
		t.Errorf("conformance header:\n%s", out)
	}
	_, table, _ := strings.Cut(out, "\n\n")
	if !strings.Contains(string(readme), table) {
		t.Errorf("README.md's conformance table differs from the real one; paste this:\n%s", table)
	}
	if !strings.HasSuffix(table, "8 cases: 8 passed, 0 failed\n") {
		t.Errorf("the quickstart plugin must pass every case:\n%s", out)
	}

	run("chat", "--plugin", "./recent.wasm", "--session", "chat.json", "-m", "I like Italian food")
	if out := run("chat", "--plugin", "./recent.wasm", "--session", "chat.json", "-m", "What food do I like?"); !strings.Contains(out, "assistant: You told me you like Italian food.") {
		t.Errorf("a new process did not remember:\n%s", out)
	}
	if out := run("history", "--plugin", "./recent.wasm", "--session", "chat.json"); !strings.Contains(out, "4 messages") {
		t.Errorf("history through the plugin's list export:\n%s", out)
	}
}

// TestConformanceNative runs the suite on the plugin's Go code in process,
// as README.md's last step suggests.
func TestConformanceNative(t *testing.T) {
	h, err := host.New(t.Context(), host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
		return h.LoadNative(ctx, "recent", sdk.Handler(provider{}), host.LoadOptions{})
	})
}

// goTool is the go command; go test puts the running toolchain's bin
// directory first in PATH, so this is the toolchain running the test.
func goTool() string { return "go" }
