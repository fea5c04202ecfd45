package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// startHost builds nothing: it runs the example binary as a separate
// process and returns its base URL.
func startHost(t *testing.T, bin, wasm, dsn string) string {
	t.Helper()
	cmd := exec.Command(bin, "-plugin", wasm)
	cmd.Env = append(os.Environ(), "WASMHIST_POSTGRES_DSN="+dsn)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "host did not start: %s", &stderr)
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	require.True(t, ok, "host said %q", line)
	return "http://" + addr
}

func post(t *testing.T, base, session, text, runID string) (int, turnResponse) {
	body, _ := json.Marshal(turnRequest{Text: text, RunID: runID})
	resp, err := http.Post(base+"/turn?session="+session, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var tr turnResponse
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&tr))
	}
	return resp.StatusCode, tr
}

func history(t *testing.T, base, session string) []string {
	resp, err := http.Get(base + "/history?session=" + session)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out []string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// users is the user lines of a history, in order.
func users(h []string) []string {
	var out []string
	for _, l := range h {
		if u, ok := strings.CutPrefix(l, "user: "); ok {
			out = append(out, u)
		}
	}
	return out
}

// TestTwoHostsOneConversation runs two host processes against one
// PostgreSQL server: they serve one conversation alternately, then take 20
// concurrent turns between them. Every acknowledged turn is stored once,
// in order; every refused one is absent; a turn repeated with its run id,
// the last or an earlier one, is answered again and not stored again; a
// run id reused for another text is refused; both hosts serve the same
// history.
func TestTwoHostsOneConversation(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.DSN("postgres")
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	bin := filepath.Join(t.TempDir(), "multihost")
	b, err := exec.Command(sdktest.GoCommand(), "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", b)
	hosts := []string{startHost(t, bin, wasm, dsn), startHost(t, bin, wasm, dsn)}

	t.Run("unknown session", func(t *testing.T) {
		for _, tc := range []struct {
			name, query string
			status      int
			want        string
		}{
			{"never created", "?session=nobody", http.StatusNotFound, `no session "nobody": POST /turn?session=nobody starts it`},
			{"no id", "", http.StatusBadRequest, "want ?session=ID"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := http.Get(hosts[0] + "/history" + tc.query)
				require.NoError(t, err)
				defer resp.Body.Close()
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				var e errorResponse
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
				assert.Equal(t, tc.want, e.Error)
			})
		}
	})

	var want, replies []string
	for i := range 6 {
		text := fmt.Sprintf("alternate %d", i)
		code, tr := post(t, hosts[i%2], "demo", text, fmt.Sprintf("alt-%d", i))
		require.Equal(t, http.StatusOK, code)
		require.NotEmpty(t, tr.Reply)
		require.False(t, tr.Replayed)
		require.EqualValues(t, i+1, tr.Revision)
		want = append(want, text)
		replies = append(replies, tr.Reply)
	}
	h0 := history(t, hosts[0], "demo")
	require.Equal(t, want, users(h0))
	require.Len(t, h0, 12, "each turn a question and an answer")
	require.Equal(t, h0, history(t, hosts[1], "demo"), "both hosts serve one history")

	// A client that lost an answer repeats the turn, on either host: the
	// last one or an earlier one, it gets the stored answer and nothing is
	// stored again.
	for _, i := range []int{5, 3, 0} {
		code, tr := post(t, hosts[(i+1)%2], "demo", fmt.Sprintf("alternate %d", i), fmt.Sprintf("alt-%d", i))
		require.Equal(t, http.StatusOK, code, "repeating alt-%d", i)
		assert.True(t, tr.Replayed, "repeating alt-%d", i)
		assert.Equal(t, replies[i], tr.Reply, "repeating alt-%d", i)
		assert.EqualValues(t, 6, tr.Revision, "repeating alt-%d", i)
		require.Equal(t, h0, history(t, hosts[1], "demo"), "repeating alt-%d stores nothing", i)
	}
	// A run id sent again with another text is refused, and the text is
	// not stored.
	code, _ := post(t, hosts[0], "demo", "I like cake", "alt-3")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, h0, history(t, hosts[1], "demo"), "a reused run id stores nothing")

	var (
		mu      sync.Mutex
		acked   = map[string]bool{}
		refused = map[string]bool{}
		wg      sync.WaitGroup
	)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("concurrent %d", i)
			code, _ := post(t, hosts[i%2], "demo", text, fmt.Sprintf("con-%d", i))
			mu.Lock()
			defer mu.Unlock()
			switch code {
			case http.StatusOK:
				acked[text] = true
			case http.StatusConflict:
				refused[text] = true
			default:
				t.Errorf("turn %q: status %d", text, code)
			}
		}()
	}
	wg.Wait()
	got := users(history(t, hosts[1], "demo"))
	require.Equal(t, want, got[:len(want)], "the alternated turns, in order")
	rest := got[len(want):]
	assert.Len(t, rest, len(acked), "exactly the acknowledged turns: %v", rest)
	seen := map[string]bool{}
	for _, u := range rest {
		assert.True(t, acked[u], "%q stored but not acknowledged", u)
		assert.False(t, seen[u], "%q stored twice", u)
		seen[u] = true
	}
	t.Logf("%d concurrent turns acknowledged, %d refused", len(acked), len(refused))
}
