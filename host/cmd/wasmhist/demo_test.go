package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeDemoSaysWhatItBuilds: before its first build, 'make demo' says
// what it builds and that the first build compiles SQLite and takes
// minutes, since a fresh machine then shows nothing for minutes. make -n
// prints the recipe in order without running it.
func TestMakeDemoSaysWhatItBuilds(t *testing.T) {
	t.Parallel()
	makeTool, err := exec.LookPath("make")
	require.NoError(t, err, "make runs the demo")
	cmd := exec.Command(makeTool, "-n", "demo")
	cmd.Dir = filepath.Join("..", "..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	before, _, found := strings.Cut(string(out), "go build")
	require.True(t, found, "make demo builds nothing:\n%s", out)
	for _, want := range []string{"plugins", "./wasmhist", "compiles SQLite", "minutes", "GB of memory"} {
		assert.Contains(t, before, want, "what make demo says before its first build")
	}
}
