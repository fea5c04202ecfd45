package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkChatProcess is what one `wasmhist chat -m` costs a user with the
// compile cache warm: the CPU time (user + system, from the child's rusage)
// of whole processes of the built command, against an offline model, beyond
// the turn itself. Each iteration runs, alternated so that the machine's
// load weighs on each alike:
//
//   - `wasmhist version`: a process that loads nothing (the baseline);
//   - `wasmhist chat -m hi`, resuming a session file;
//   - `wasmhist chat` with one and with two lines on standard input: the
//     difference is what one more turn costs (model, provide, store, save).
//
// beyond-turn-ms is chat-ms minus that turn; process-ms is version-ms.
func BenchmarkChatProcess(b *testing.B) {
	for _, plugin := range []string{"inmemory", "sqlite"} {
		b.Run(plugin, func(b *testing.B) {
			dir := b.TempDir()
			env := append(os.Environ(), cacheDirEnv+"="+filepath.Join(dir, "cache"), pluginDirEnv+"="+pluginDir)
			env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "OPENAI_API_KEY=") })
			chat := func(session string) []string {
				return []string{"chat", "--model", "offline", "--plugin", plugin, "--session", filepath.Join(dir, session)}
			}
			// The first run fills the compile cache; the second the page
			// cache with the cached code.
			for range 2 {
				processCPU(b, env, "", append(chat("m.json"), "-m", "hi")...)
			}
			var version, m, one, two time.Duration
			for b.Loop() {
				version += processCPU(b, env, "", "version")
				m += processCPU(b, env, "", append(chat("m.json"), "-m", "hi")...)
				one += processCPU(b, env, "hi\n", chat("one.json")...)
				two += processCPU(b, env, "hi\nhow are you?\n", chat("two.json")...)
			}
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
			turn := per(two) - per(one)
			b.ReportMetric(per(version), "process-ms")
			b.ReportMetric(per(m), "chat-ms")
			b.ReportMetric(turn, "turn-ms")
			b.ReportMetric(per(m)-turn, "beyond-turn-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// processCPU runs the command and returns the CPU time its process used.
func processCPU(b *testing.B, env []string, stdin string, args ...string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(b, cmd.Run(), "wasmhist %s: %s", strings.Join(args, " "), stderr.String())
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkChatInProcess runs `wasmhist chat -m hi` in this process, from
// the command's entry point, with the compile cache warm: the same path as
// BenchmarkChatProcess without the process around it, for profiles
// (-cpuprofile). What a process does once (package initialisation, the
// project schemas) is paid by the first iteration only.
func BenchmarkChatInProcess(b *testing.B) {
	dir := b.TempDir()
	vars := map[string]string{cacheDirEnv: filepath.Join(dir, "cache"), pluginDirEnv: pluginDir}
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k)
	}}
	args := []string{"chat", "--model", "offline", "--plugin", "inmemory", "--session", filepath.Join(dir, "s.json"), "-m", "hi"}
	for range 2 {
		require.Equal(b, exitOK, run(b.Context(), args, e))
	}
	for b.Loop() {
		if code := run(b.Context(), args, e); code != exitOK {
			b.Fatalf("wasmhist chat: exit status %d", code)
		}
	}
}
