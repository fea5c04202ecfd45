package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProgressOnTerminalOnly: reading a history of many pages, exporting
// a large session to a file and migrating a store show how far they got
// on standard error when it is a terminal (a pseudo-terminal here), and
// write nothing there when it is a pipe. An export printed to the
// terminal is its own progress, and gets no line cut into it.
func TestProgressOnTerminalOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// 300 messages of ~400 bytes: three pages of history, 120 KiB of export.
	var msgs []map[string]string
	for i := range 300 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": fmt.Sprintf("message %d %s", i, strings.Repeat("x", 400))})
	}
	doc, err := json.Marshal(msgs)
	require.NoError(t, err)
	invocation{dir: dir, stdin: string(doc)}.ok(t, "session", "import", "--format", "openai", "big.json")
	for _, id := range []string{"a", "b"} {
		invocation{dir: dir}.ok(t, "chat", "--store", "src/", "--session", id, "-m", "I like Rome")
	}

	tests := []struct {
		name, line string // the command line, with OUT naming a file of its own per run
		want       string // on a terminal's standard error; "" for nothing
	}{
		{"history", "wasmhist history --session big.json > OUT", "messages of"},
		{"history to the terminal", "wasmhist history --session big.json", "messages of"},
		{"export", "wasmhist session export big.json > OUT", "MiB written"},
		{"export to the terminal", "wasmhist session export big.json", ""},
		{"migrate", "wasmhist session migrate --from src/ --to OUT.d/ > OUT", "sessions done"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			master, tty := openPTY(t)
			scr := newScreen(master)
			cmd := exec.Command("sh", "-c", strings.ReplaceAll(tc.line, "OUT", "tty-"+strings.ReplaceAll(tc.name, " ", "-")))
			cmd.Dir, cmd.Env = dir, append(shellEnv(), "OPENAI_API_KEY=")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { cmd.Process.Kill() })
			require.Equal(t, 0, exitCode(t, cmd), "screen:\n%s", scr)
			if tc.want != "" {
				scr.waitFor(t, tc.want, 1)
			} else {
				scr.waitFor(t, `"totals"`, 1)
				for _, w := range []string{"MiB written", "wasmhist session export:"} {
					assert.NotContains(t, scr.String(), w, "a progress line cut into the output")
				}
			}

			pipe := exec.Command("sh", "-c", strings.ReplaceAll(tc.line, "OUT", "pipe-"+strings.ReplaceAll(tc.name, " ", "-")))
			pipe.Dir, pipe.Env = dir, shellEnv()
			var stderr strings.Builder
			pipe.Stderr = &stderr
			require.NoError(t, pipe.Run(), "stderr: %s", stderr.String())
			assert.Empty(t, stderr.String(), "progress written to a pipe")
		})
	}
	out, err := os.ReadFile(filepath.Join(dir, "tty-export"))
	require.NoError(t, err)
	assert.True(t, json.Valid(out), "the export a progress line was shown beside is a whole document")
}
