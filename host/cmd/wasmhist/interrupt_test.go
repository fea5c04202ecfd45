package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// These tests interrupt the built command as a user does: Ctrl-C typed
// into a real pseudo-terminal, whose line discipline turns it into SIGINT
// for the command's process group, or SIGINT sent to a command reading a
// pipe.

// openPTY opens a pseudo-terminal pair through /dev/ptmx.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { master.Close() })
	var unlock int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno, "unlock pty")
	var n uint32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno, "pty number")
	tty, err = os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

func itoa(n uint32) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

// screen collects what the command writes to its terminal and lets a
// test wait for a text to appear.
type screen struct {
	mu   sync.Mutex
	cond *sync.Cond
	buf  bytes.Buffer
	done bool
}

func newScreen(master *os.File) *screen {
	s := &screen{}
	s.cond = sync.NewCond(&s.mu)
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			if err != nil {
				s.done = true
			}
			s.cond.Broadcast()
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// waitFor waits until text has appeared count times on the screen.
func (s *screen) waitFor(t *testing.T, text string, count int) {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() {
		s.mu.Lock()
		s.done = true
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for strings.Count(s.buf.String(), text) < count {
		if s.done {
			t.Fatalf("%q did not appear %d times; the screen shows:\n%s", text, count, s.buf.String())
		}
		s.cond.Wait()
	}
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startInTerminal starts the command with the pseudo-terminal as its
// controlling terminal and standard streams.
func startInTerminal(t *testing.T, tty *os.File, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(append(os.Environ(), pluginDirEnv+"="+pluginDir, "OPENAI_API_KEY="), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

// exitCode waits for cmd to end; one that has not ended a minute later
// is killed and fails the test (an ignored interrupt).
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	require.True(t, timer.Stop(), "the command did not end within a minute of the interrupt")
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// hangingModel is an OpenAI-compatible server whose every call waits
// until the client goes away; arrived receives a value per call.
func hangingModel(t *testing.T) (baseURL string, arrived <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 8)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch <- struct{}{}
		<-r.Context().Done()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/v1", ch
}

func readRevision(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := session.Decode(b)
	require.NoError(t, err)
	return s.Revision
}

// TestInterruptAtPromptEndsChat: Ctrl-C at the prompt ends the chat with
// status 130, and the session keeps the turn committed before.
func TestInterruptAtPromptEndsChat(t *testing.T) {
	master, tty := openPTY(t)
	scr := newScreen(master)
	file := filepath.Join(t.TempDir(), "chat.json")
	cmd := startInTerminal(t, tty, nil, "chat", "--session", file)
	scr.waitFor(t, "you> ", 1)
	_, err := master.Write([]byte("I like Italian food\r"))
	require.NoError(t, err)
	scr.waitFor(t, "assistant: ", 1)
	scr.waitFor(t, "you> ", 2)
	_, err = master.Write([]byte{3}) // Ctrl-C
	require.NoError(t, err)
	assert.Equal(t, exitInterrupted, exitCode(t, cmd), "screen:\n%s", scr)
	scr.waitFor(t, "interrupted at the prompt", 1)
	assert.Equal(t, int64(1), readRevision(t, file), "the committed turn stays")
}

// TestInterruptDuringCallCancelsIt: Ctrl-C while the model is answering
// cancels that turn, stores nothing of it, and gives the prompt back;
// Ctrl-D then ends the chat normally.
func TestInterruptDuringCallCancelsIt(t *testing.T) {
	base, arrived := hangingModel(t)
	master, tty := openPTY(t)
	scr := newScreen(master)
	file := filepath.Join(t.TempDir(), "chat.json")
	cmd := startInTerminal(t, tty, nil, "chat", "--session", file, "--model", "openai-chat", "--base-url", base)
	scr.waitFor(t, "you> ", 1)
	_, err := master.Write([]byte("hello\r"))
	require.NoError(t, err)
	<-arrived
	_, err = master.Write([]byte{3})
	require.NoError(t, err)
	scr.waitFor(t, "the turn was cancelled", 1)
	scr.waitFor(t, "you> ", 2)
	_, err = master.Write([]byte{4}) // Ctrl-D: end of input
	require.NoError(t, err)
	assert.Equal(t, 0, exitCode(t, cmd), "screen:\n%s", scr)
	if _, err := os.Stat(file); err == nil {
		assert.Zero(t, readRevision(t, file), "nothing of the cancelled turn is committed")
	}
}

// TestInterruptOneShotCall: Ctrl-C (SIGINT) during -m's model call ends
// the command with status 130 and one line saying so.
func TestInterruptOneShotCall(t *testing.T) {
	base, arrived := hangingModel(t)
	cmd := exec.Command(binary, "chat", "--model", "openai-chat", "--base-url", base, "-m", "hello")
	cmd.Env = append(os.Environ(), pluginDirEnv+"="+pluginDir, "OPENAI_API_KEY=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	<-arrived
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, exitInterrupted, exitCode(t, cmd))
	assert.Contains(t, stderr.String(), "wasmhist chat: interrupted: the turn was cancelled")
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line: %q", stderr.String())
}

// TestInterruptWhileWaitingForPipedLine: SIGINT while chat waits for the
// next line of a pipe ends it at once with status 130, without waiting for
// the pipe to close.
func TestInterruptWhileWaitingForPipedLine(t *testing.T) {
	cmd := exec.Command(binary, "chat")
	cmd.Env = append(os.Environ(), pluginDirEnv+"="+pluginDir, "OPENAI_API_KEY=")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	_, err = stdin.Write([]byte("What is 6*7?\n"))
	require.NoError(t, err)
	// The answer's lines end with the session line; after it chat waits.
	var seen bytes.Buffer
	b := make([]byte, 4096)
	for !strings.Contains(seen.String(), "session: ") {
		n, err := stdout.Read(b)
		require.NoError(t, err, "output so far: %s", seen.String())
		seen.Write(b[:n])
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, exitInterrupted, exitCode(t, cmd))
}

// hangWasm builds testdata/hangplugin once: a plugin whose list and clear
// exports say on standard error that they started, then never answer.
var hangWasm = sync.OnceValues(func() (string, error) { return sdktest.Build("./testdata/hangplugin") })

// TestInterruptWhileReadingSession: Ctrl-C (SIGINT) while a plugin reads a
// session ends the command with status 130 and one line saying it was
// interrupted, never that the session is broken or needs checking.
func TestInterruptWhileReadingSession(t *testing.T) {
	wasm, err := hangWasm()
	require.NoError(t, err)
	dir := t.TempDir()
	invocation{dir: dir}.ok(t, "chat", "--plugin", wasm, "--session", "s.json", "-m", "hi")
	tests := []struct {
		name string
		args []string
	}{
		{"history", []string{"history", "--session", "s.json"}},
		{"session validate", []string{"session", "validate", "s.json"}},
		{"session show", []string{"session", "show", "s.json"}},
		{"session delete", []string{"session", "delete", "s.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--plugin", wasm, "--timeout", "1m")
			cmd := exec.Command(binary, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), pluginDirEnv+"="+pluginDir, "OPENAI_API_KEY=", "EXTISM_ENABLE_WASI_OUTPUT=1")
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			var seen bytes.Buffer
			b := make([]byte, 4096)
			for !strings.Contains(seen.String(), "hangplugin: waiting\n") {
				n, err := stderr.Read(b)
				require.NoError(t, err, "stderr so far: %s", seen.String())
				seen.Write(b[:n])
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			rest, err := io.ReadAll(stderr)
			require.NoError(t, err)
			assert.Equal(t, exitInterrupted, exitCode(t, cmd))
			out := strings.TrimPrefix(strings.TrimPrefix(seen.String()+string(rest), "hangplugin: waiting\n"), "\n")
			assert.Equal(t, 1, strings.Count(out, "\n"), "one line: %q", out)
			assert.Contains(t, out, "wasmhist "+strings.Join(strings.Fields(tc.name), " ")+": interrupted while")
			assert.FileExists(t, filepath.Join(dir, "s.json"), "the session is kept")
			for _, wrong := range []string{"not a session", "repair", "'wasmhist session validate", "broken"} {
				assert.NotContains(t, out, wrong)
			}
		})
	}
}
