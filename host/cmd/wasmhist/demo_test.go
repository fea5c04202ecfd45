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

// TestMakeDemoNeedsOnlyGo: make demo and make install build the Go sample
// plugins alone, so a machine with Go and make runs them (the
// AssemblyScript plugin needs Node.js and npm). -B takes every target as
// out of date, so a built asmemory.wasm does not hide the npm step.
func TestMakeDemoNeedsOnlyGo(t *testing.T) {
	t.Parallel()
	makeTool, err := exec.LookPath("make")
	require.NoError(t, err, "make runs the demo")
	for _, target := range []string{"demo", "install"} {
		cmd := exec.Command(makeTool, "-n", "-B", target)
		cmd.Dir = filepath.Join("..", "..", "..")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.NotContains(t, string(out), "npm", "make %s runs npm", target)
		assert.Contains(t, string(out), "-buildmode=c-shared -o plugins/$p/$p.wasm", "make %s builds the Go plugins", target)
	}
	cmd := exec.Command(makeTool, "-n", "-B", "plugins")
	cmd.Dir = filepath.Join("..", "..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "npm ci", "make plugins builds the AssemblyScript plugin")
}
