package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// These tests build the command once and run the binary, as a user would:
// every command's output, exit status and files are what is checked.

// testPlugins are the sample plugins the tests build.
var testPlugins = []string{"inmemory", "sqlite"}

var (
	// binary is the built command.
	binary string
	// pluginDir holds the sample plugins as <name>.wasm, found through
	// WASMHIST_PLUGIN_DIR.
	pluginDir string
	// brokenWasm is testdata/brokenplugin built: a plugin that forgets the
	// model's answers.
	brokenWasm string
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wasmhist-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Tests that run the command as another user (readonly_unix_test.go) need
	// to reach the binary and the plugins.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The interactive chats the tests run keep their line history here,
	// not in the user's state directory.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building the command and plugins:", err)
		return 1
	}
	return m.Run()
}

// build compiles the command and the plugins the tests run.
func build(dir string) error {
	binary = filepath.Join(dir, "bin", "wasmhist")
	if runtime.GOOS == "windows" {
		binary += ".exe"
	}
	out, err := exec.Command(goTool(), "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	pluginDir = filepath.Join(dir, "plugins")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return err
	}
	for _, name := range testPlugins {
		wasm, err := sdktest.Build("github.com/wasmhist/wasmhist/plugins/" + name)
		if err != nil {
			return err
		}
		if err := copyFile(wasm, filepath.Join(pluginDir, name+".wasm")); err != nil {
			return err
		}
	}
	brokenWasm, err = sdktest.Build("./testdata/brokenplugin")
	return err
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// goTool is the go command; go test puts the running toolchain's bin
// directory first in PATH, so this is the toolchain running the test.
func goTool() string { return "go" }

// result is what one run of the binary did.
type result struct {
	stdout, stderr string
	code           int
}

// invocation is how a test calls the command.
type invocation struct {
	dir   string   // working directory; default a new temporary one
	env   []string // added to the environment
	stdin string
	attr  *syscall.SysProcAttr // e.g. the user to run as; default the test's
}

// wasmhist runs the binary with args. The environment is the test's minus
// OPENAI_API_KEY (no test may reach a real service), with
// WASMHIST_PLUGIN_DIR set to the built plugins unless r.env overrides it.
func (r invocation) wasmhist(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = r.dir
	if cmd.Dir == "" {
		cmd.Dir = t.TempDir()
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_API_KEY=") && !strings.HasPrefix(kv, pluginDirEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, pluginDirEnv+"="+pluginDir)
	cmd.Env = append(cmd.Env, r.env...)
	cmd.Stdin = strings.NewReader(r.stdin)
	cmd.SysProcAttr = r.attr
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else {
		require.NoError(t, err, "running wasmhist %s", strings.Join(args, " "))
	}
	return res
}

// ok runs the command and fails the test unless it succeeds quietly.
func (r invocation) ok(t *testing.T, args ...string) string {
	t.Helper()
	res := r.wasmhist(t, args...)
	require.True(t, res.code == 0 && res.stderr == "", "wasmhist %s: exit %d\nstderr: %s\nstdout: %s", strings.Join(args, " "), res.code, res.stderr, res.stdout)
	return res.stdout
}

// failsWithOneLine runs the command and checks that it fails with exit
// status code and one line on stderr naming the command and containing
// every want.
func (r invocation) failsWithOneLine(t *testing.T, code int, args []string, want ...string) string {
	t.Helper()
	res := r.wasmhist(t, args...)
	require.Equal(t, code, res.code, "wasmhist %s: exit status\nstderr: %s\nstdout: %s", strings.Join(args, " "), res.stderr, res.stdout)
	line, rest, _ := strings.Cut(res.stderr, "\n")
	require.True(t, rest == "" && line != "", "wasmhist %s: stderr is not one line:\n%s", strings.Join(args, " "), res.stderr)
	assert.True(t, strings.HasPrefix(line, "wasmhist ") || strings.HasPrefix(line, "wasmhist: "), "error %q does not start with the command name", line)
	for _, w := range want {
		assert.Contains(t, line, w, "error")
	}
	return line
}
