package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// referenceExamples returns the command lines of the sh block of
// docs/commands.md's "Examples" section.
func referenceExamples(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "commands.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## Examples\n")
	require.True(t, ok, "docs/commands.md has no Examples section")
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok, "the Examples section has no sh block")
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// localModelURL is the OpenAI-compatible server the reference's examples
// name; the test puts a fake of the service there.
const localModelURL = "http://localhost:11434/v1"

// TestCommandReferenceExamples runs the examples of docs/commands.md in
// order, in one empty directory, with the built command first in PATH, a
// HOME of their own (holding ~/src/wasmhist, the clone 'new plugin' builds
// against), a PostgreSQL server in $WASMHIST_POSTGRES_DSN and the offline
// model, or a fake OpenAI service for the line that names one: each must
// succeed. Every example a command's help shows
// is one of them, so that those run too.
func TestCommandReferenceExamples(t *testing.T) {
	t.Parallel()
	examples := referenceExamples(t)
	dir, home := t.TempDir(), t.TempDir()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, "src"), 0o755))
	require.NoError(t, os.Symlink(root, filepath.Join(home, "src", "wasmhist")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "plugins", "inmemory"), 0o755))
	require.NoError(t, copyFile(filepath.Join(pluginDir, "inmemory.wasm"), filepath.Join(dir, "plugins", "inmemory", "inmemory.wasm")))
	srv := openaitest.NewServer(t)
	env := append(os.Environ(), postgresDSNEnv+"="+pgtest.Start(t).DSN("postgres"),
		"PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"),
		pluginDirEnv+"="+pluginDir, "HOME="+home, cacheDirEnv+"="+filepath.Join(home, "cache"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"), "OPENAI_API_KEY=", configFileEnv+"=")
	for _, line := range examples {
		if strings.Contains(line, localModelURL) {
			srv.Enqueue(openaitest.Text("Hello from the fake service."))
			line = strings.ReplaceAll(line, localModelURL, srv.URL)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		require.NoError(t, err, "%s\nstderr: %s\nstdout: %s", line, stderr.String(), stdout.String())
		assert.Empty(t, stderr.String(), line)
	}
	assert.Zero(t, srv.Pending(), "the openai example did not reach the fake service")

	for _, path := range append([][]string{{}}, commandPaths...) {
		out := invocation{}.ok(t, append(slices.Clone(path), "--help")...)
		_, ex, _ := strings.Cut(out, "\nExamples:\n")
		ex, _, _ = strings.Cut(ex, "\n\n")
		for _, l := range strings.Split(strings.TrimSpace(ex), "\n") {
			l = strings.TrimSpace(l)
			assert.True(t, slices.ContainsFunc(examples, func(x string) bool { return strings.Contains(x, l) }),
				"the example %q of 'wasmhist %s --help' is not in docs/commands.md's Examples, which a test runs", l, strings.Join(path, " "))
		}
	}
}

// TestCommandReferenceCacheLimit: the reference states the compile
// cache's limit that the command keeps.
func TestCommandReferenceCacheLimit(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "commands.md"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "kept under "+byteSize(maxCacheBytes).String()+",")
}
