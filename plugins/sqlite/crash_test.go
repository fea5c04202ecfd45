//go:build !wasip1

package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// buildChild compiles testdata/crashchild without the race detector, whatever
// the test binary was built with: it is started fifty times, and a
// race-instrumented host takes seconds to start.
func buildChild(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "crashchild")
	cmd := exec.Command(sdktest.GoCommand(), "build", "-o", out, "./testdata/crashchild")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "build crash child:\n%s", b)
	return out
}

// TestAtomicityUnderProcessKill kills a process that stores turns with
// SIGKILL at random points, again and again on one database, and then
// checks that the database is intact and holds every store the process
// acknowledged, in order, exactly once, each turn whole.
//
// It proves atomicity when a process dies, not durability against power
// loss: SIGKILL leaves the kernel's page cache, so writes the process made
// reach the disk even without fsync. The random seed is logged; set
// WASMHIST_CRASH_SEED to run the same kill points again.
func TestAtomicityUnderProcessKill(t *testing.T) {
	const kills = 50
	wasm := sdktest.BuildPlugin(t, importPath)
	child := buildChild(t)
	db := filepath.Join(t.TempDir(), "crash.db")
	key := strings.Repeat("c0ffee", 5) + "00"
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("WASMHIST_CRASH_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "WASMHIST_CRASH_SEED")
	}
	t.Logf("seed %d (WASMHIST_CRASH_SEED=%d reruns these kill points)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	var acked []string
	start := time.Now()
	for run := range kills {
		acked = append(acked, crashRun(t, child, wasm, db, key, run, rng)...)
	}
	t.Logf("%d kills, %d acknowledged stores, %s", kills, len(acked), time.Since(start))

	conn, err := sql.Open("sqlite", "file:"+db)
	require.NoError(t, err)
	defer conn.Close()
	var integrity string
	require.NoError(t, conn.QueryRow("PRAGMA integrity_check").Scan(&integrity), "integrity_check")
	require.Equal(t, "ok", integrity, "integrity_check")
	rows, err := conn.Query("SELECT seq, body FROM messages WHERE session = ? ORDER BY seq", key)
	require.NoError(t, err)
	defer rows.Close()
	var stored []string // turn ids, one per whole turn
	seen := map[string]bool{}
	var pending string // a turn whose question was read, waiting for its answer
	lastSeq := int64(0)
	for rows.Next() {
		var seq int64
		var body string
		require.NoError(t, rows.Scan(&seq, &body))
		require.Equal(t, lastSeq+1, seq, "sequence jumps from %d", lastSeq)
		lastSeq = seq
		var m abi.Message
		require.NoError(t, json.Unmarshal([]byte(body), &m), "message %d", seq)
		text := m.Contents[0].Text
		switch {
		case pending == "" && strings.HasSuffix(text, "-q"):
			pending = strings.TrimSuffix(text, "-q")
		case pending != "" && text == pending+"-a":
			require.False(t, seen[pending], "turn %s stored twice", pending)
			seen[pending] = true
			stored = append(stored, pending)
			pending = ""
		default:
			require.Failf(t, "a message breaks a turn", "message %d %q (pending %q)", seq, text, pending)
		}
	}
	require.NoError(t, rows.Err())
	require.Empty(t, pending, "a turn stored without its answer")
	// Acknowledged turns appear in acknowledgement order; a turn that
	// committed but was killed before its acknowledgement may sit between.
	i := 0
	for _, id := range stored {
		if i < len(acked) && id == acked[i] {
			i++
		}
	}
	missing := ""
	if i < len(acked) {
		missing = acked[i]
	}
	require.Equal(t, len(acked), i, "acknowledged turn %s missing or out of order (%d stored turns, %d acknowledged)", missing, len(stored), len(acked))
	require.LessOrEqual(t, len(stored), len(acked)+kills, "more turns stored than %d acknowledged plus one in flight per kill", len(acked))
}

// crashRun starts a child, lets it acknowledge a few stores, kills it at a
// random moment and returns the turns it acknowledged.
func crashRun(t *testing.T, child, wasm, db, key string, run int, rng *rand.Rand) []string {
	t.Helper()
	cmd := exec.Command(child, wasm, db, key, fmt.Sprint(run))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// A child that stops making progress is a failure, not a hang of the
	// whole test run.
	var hung atomic.Bool
	watchdog := time.AfterFunc(time.Minute, func() { hung.Store(true); cmd.Process.Kill() })
	defer watchdog.Stop()
	var acked []string
	killAfter := rng.IntN(4) // acknowledgements before the kill
	scheduled := false
	for line := range lines {
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, id)
		}
		if !scheduled && (line == "ready" || strings.HasPrefix(line, "ack ")) && len(acked) >= killAfter {
			// A random moment inside the next store (a few ms each).
			scheduled = true
			time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, func() { cmd.Process.Kill() })
		}
	}
	err = cmd.Wait()
	require.False(t, hung.Load(), "run %d: child made no progress for a minute; stderr:\n%s", run, stderr.String())
	require.ErrorContains(t, err, "killed", "run %d: child not killed; stderr:\n%s", run, stderr.String())
	return acked
}
