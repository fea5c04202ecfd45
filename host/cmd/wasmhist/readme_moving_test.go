package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeShell returns the command lines of the sh blocks of the README
// section titled title, comments left out.
func readmeShell(t *testing.T, title string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n## "+title+"\n")
	require.True(t, ok, "README.md has no section %q", title)
	section, _, _ = strings.Cut(section, "\n## ")
	var lines []string
	for _, block := range strings.Split(section, "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for _, l := range strings.Split(block, "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
	}
	require.NotEmpty(t, lines, "section %q has no sh block", title)
	return lines
}

// TestReadmeMovingCopyingForking runs the shell lines of the README's
// "Moving, copying and forking conversations" in order, in one new
// directory, with the built command first in PATH: each must succeed
// quietly, and what they leave must be what the section says.
func TestReadmeMovingCopyingForking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"), pluginDirEnv+"="+pluginDir)
	out := map[string]string{}
	for _, line := range readmeShell(t, "Moving, copying and forking conversations") {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		require.NoError(t, err, "%s\nstderr: %s\nstdout: %s", line, stderr.String(), stdout.String())
		require.Empty(t, stderr.String(), line)
		out[line] = stdout.String()
	}
	r := invocation{dir: dir}
	assert.Len(t, historyTexts(t, r, "--session", "rome.json"), 2, "the branch at turn 1")
	assert.Len(t, historyTexts(t, r, "--session", "copy.json"), 6, "the copy and its own turn")
	trip := historyTexts(t, r, "--session", "archive/trip.json")
	require.Len(t, trip, 6, "the moved original")
	assert.Equal(t, "assistant: You told me you like Rome and you like Florence.", trip[5])
	assert.NotContains(t, trip, "user: I like Venice", "the copy's turn reached the original")
	assert.Len(t, historyTexts(t, r, "--store", "sessions.db", "--session", "trip-2"), 4)
	assert.Equal(t, trip, historyTexts(t, r, "--session", "from-openai.json"), "the history back from the Chat Completions array")
}
