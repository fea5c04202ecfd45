package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNewPlugin: `new plugin` run inside the clone writes a module (named
// here with a leading digit, as SPEC allows) that, outside it, tidies,
// builds to wasm with the standard toolchain, passes `wasmhist
// conformance`, and passes its own native conformance test.
func TestNewPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin module from scratch")
	}
	dir := filepath.Join(t.TempDir(), "1hello")
	// The working directory is this package's, inside the wasmhist module:
	// the default --wasmhist.
	wd, err := os.Getwd()
	require.NoError(t, err)
	out := invocation{dir: wd}.ok(t, "new", "plugin", "1hello", "--dir", dir)
	assert.Contains(t, out, "cd "+dir+" && go mod tidy && make && wasmhist conformance 1hello.wasm")

	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(gomod), "module example.com/1hello\n")
	assert.Contains(t, string(gomod), "replace github.com/wasmhist/wasmhist => \""+root+"\"\n")

	goCmd(t, dir, nil, "mod", "tidy")
	goCmd(t, dir, []string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-o", "1hello.wasm", ".")
	conf := invocation{dir: dir}.ok(t, "conformance", "1hello.wasm")
	assert.True(t, strings.HasPrefix(conf, "conformance of 1hello 0.1.0 "), "conformance header:\n%s", conf)
	assert.Contains(t, conf, "18 cases: 16 passed, 0 failed, 2 skipped\n")
	assert.Contains(t, goCmd(t, dir, nil, "test", "./..."), "ok  \texample.com/1hello")

	// What the author's module pays for the native test: the host's
	// runtime, not the agent's model clients or the sqlite plugin's driver.
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	require.NoError(t, err)
	t.Logf("go.sum of the new plugin module: %d lines", strings.Count(string(sum), "\n"))
	for _, heavy := range []string{"openai", "modernc.org/sqlite", "jackc/pgx"} {
		assert.NotContains(t, string(sum), heavy, "the plugin module's go.sum")
	}
}

// TestNewPluginIsTheQuickstart: the generated sources are the
// quickstart's, so what the quickstart explains is what `new` writes.
func TestNewPluginIsTheQuickstart(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	files, err := pluginFiles(newPlugin{Name: "recent", Module: "example.com/recent", Wasmhist: root, Go: "1.26"})
	require.NoError(t, err)
	got := map[string]string{}
	for _, f := range files {
		got[f.name] = string(f.data)
	}
	for _, name := range []string{"main.go", "conformance_test.go"} {
		want, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "quickstart", "plugin", name))
		require.NoError(t, err)
		assert.Equal(t, string(want), got[name], "%s written by new differs from the quickstart's", name)
	}
	assert.Contains(t, got["Makefile"], "recent.wasm: go.mod $(wildcard *.go)\n\tGOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $@ .\n")
}

func TestNewPluginRefuses(t *testing.T) {
	outside := t.TempDir()
	existing := t.TempDir()
	tests := []struct {
		name string
		dir  string
		args []string
		code int
		want []string
	}{
		{name: "no clone outside one", dir: outside, args: []string{"new", "plugin", "p"}, code: exitUsage, want: []string{"pass --wasmhist PATH"}},
		{name: "not a clone", dir: outside, args: []string{"new", "plugin", "p", "--wasmhist", outside}, code: exitUsage, want: []string{"is not a clone of wasmhist"}},
		{name: "existing dir", args: []string{"new", "plugin", "p", "--dir", existing, "--wasmhist", "../../.."}, code: exitFail, want: []string{"already exists", "pass --dir"}},
		{name: "bad name", args: []string{"new", "plugin", "My Plugin", "--wasmhist", "../../.."}, code: exitUsage, want: []string{"lower-case"}},
		{name: "leading underscore", args: []string{"new", "plugin", "_p", "--wasmhist", "../../.."}, code: exitUsage, want: []string{"starting with a letter or digit"}},
		{name: "65 characters", args: []string{"new", "plugin", strings.Repeat("p", 65), "--wasmhist", "../../.."}, code: exitUsage, want: []string{"1-64 lower-case"}},
		{name: "no kind", args: []string{"new", "p"}, code: exitUsage, want: []string{"wasmhist new plugin NAME"}},
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir == "" {
				dir = wd
			}
			invocation{dir: dir}.failsWithOneLine(t, tt.code, tt.args, tt.want...)
		})
	}
	entries, err := os.ReadDir(existing)
	require.NoError(t, err)
	assert.Empty(t, entries, "new wrote into a directory that existed")
}

// goCmd runs the go command in dir with Go's default module settings (no
// -mod flag, no workspace), as a plugin author would, and returns its output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOFLAGS" && k != "GOWORK" && k != "GOOS" && k != "GOARCH" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "GOWORK=off", "GOFLAGS=-buildvcs=false"), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}
