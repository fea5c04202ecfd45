package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInterruptWhileImportChecks: Ctrl-C (SIGINT) while session import
// checks a part of the document that takes seconds to check (a valid
// message of 300,000 parts, about 9 s; a session of 350,000 pending tool
// calls, about 6 s) ends the command within a fraction of that time, with
// status 130 and one line saying it was interrupted and nothing was
// imported, never that the document is wrong.
func TestInterruptWhileImportChecks(t *testing.T) {
	dir := t.TempDir()
	invocation{dir: dir}.ok(t, "chat", "--session", "s.json", "-m", "SLOWMARK")
	doc := invocation{dir: dir}.ok(t, "session", "export", "s.json")
	parts := `[` + strings.Repeat(`{"type":"text","text":"x"},`, 299_999) + `{"type":"text","text":"x"}]`
	calls := `"pending_tool_calls":[` + strings.Repeat(`{"call_id":"c","name":"n","arguments":{}},`, 349_999) + `{"call_id":"c","name":"n","arguments":{}}]`
	tests := []struct {
		name, old, new string
	}{
		{"message", `[{"type":"text","text":"SLOWMARK"}]`, parts},
		{"session", `"session_id":"s"`, `"session_id":"s",` + calls},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			big := strings.Replace(doc, tc.old, tc.new, 1)
			require.NotEqual(t, doc, big, "the export holds %s", tc.old)
			end := strings.Index(big, tc.new) + len(tc.new)
			in := filepath.Join(dir, tc.name+".json")
			require.NoError(t, os.WriteFile(in, []byte(big), 0o600))
			f, err := os.Open(in)
			require.NoError(t, err)
			defer f.Close()
			cmd := exec.Command(binary, "session", "import", "copy-"+tc.name+".json")
			cmd.Dir, cmd.Stdin = dir, f
			cmd.Env = append(os.Environ(), pluginDirEnv+"="+pluginDir, "OPENAI_API_KEY=")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			require.Eventually(t, func() bool {
				info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/0", cmd.Process.Pid))
				var pos int
				return err == nil && sscanPos(string(info), &pos) && pos >= end
			}, 30*time.Second, 5*time.Millisecond, "the command never read the part")
			// Read, the part is being checked well within a second; the
			// check takes seconds.
			time.Sleep(time.Second)
			sent := time.Now()
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			assert.Equal(t, exitInterrupted, exitCode(t, cmd), "stderr: %s", stderr.String())
			assert.Less(t, time.Since(sent), 3*time.Second, "the check ran on past the interrupt")
			out := stderr.String()
			assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
			assert.Contains(t, out, "interrupted while")
			assert.Contains(t, out, "nothing was imported")
			for _, wrong := range []string{"invalid", "malformed", "not a portable session document", "changed after export"} {
				assert.NotContains(t, out, wrong)
			}
			assert.NoFileExists(t, filepath.Join(dir, "copy-"+tc.name+".json"))
		})
	}
}

// sscanPos reads the "pos:" line of a /proc fdinfo file.
func sscanPos(info string, pos *int) bool {
	for line := range strings.Lines(info) {
		if _, err := fmt.Sscanf(line, "pos: %d", pos); err == nil {
			return true
		}
	}
	return false
}
