//go:build !wasip1

package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build crash child: %v\n%s", err, b)
	}
	return out
}

// TestCrashDurability kills a process that stores turns with SIGKILL at
// random points, again and again on one database, and then checks that the
// database is intact and holds every store the process acknowledged, in
// order, exactly once, each turn whole.
func TestCrashDurability(t *testing.T) {
	const kills = 50
	wasm := sdktest.BuildPlugin(t, importPath)
	child := buildChild(t)
	db := filepath.Join(t.TempDir(), "crash.db")
	key := strings.Repeat("c0ffee", 5) + "00"
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	var acked []string
	start := time.Now()
	for run := range kills {
		acked = append(acked, crashRun(t, child, wasm, db, key, run, rng)...)
	}
	t.Logf("%d kills, %d acknowledged stores, %s", kills, len(acked), time.Since(start))

	conn, err := sql.Open("sqlite", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var integrity string
	if err := conn.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q, %v", integrity, err)
	}
	rows, err := conn.Query("SELECT seq, body FROM messages WHERE session = ? ORDER BY seq", key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var stored []string // turn ids, one per whole turn
	seen := map[string]bool{}
	var pending string // a turn whose question was read, waiting for its answer
	lastSeq := int64(0)
	for rows.Next() {
		var seq int64
		var body string
		if err := rows.Scan(&seq, &body); err != nil {
			t.Fatal(err)
		}
		if seq != lastSeq+1 {
			t.Fatalf("sequence jumps from %d to %d", lastSeq, seq)
		}
		lastSeq = seq
		var m abi.Message
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		text := m.Contents[0].Text
		switch {
		case pending == "" && strings.HasSuffix(text, "-q"):
			pending = strings.TrimSuffix(text, "-q")
		case pending != "" && text == pending+"-a":
			if seen[pending] {
				t.Fatalf("turn %s stored twice", pending)
			}
			seen[pending] = true
			stored = append(stored, pending)
			pending = ""
		default:
			t.Fatalf("message %d %q breaks a turn (pending %q)", seq, text, pending)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if pending != "" {
		t.Fatalf("turn %s stored without its answer", pending)
	}
	// Acknowledged turns appear in acknowledgement order; a turn that
	// committed but was killed before its acknowledgement may sit between.
	i := 0
	for _, id := range stored {
		if i < len(acked) && id == acked[i] {
			i++
		}
	}
	if i != len(acked) {
		t.Fatalf("acknowledged turn %s missing or out of order (%d stored turns, %d acknowledged)", acked[i], len(stored), len(acked))
	}
	if len(stored) > len(acked)+kills {
		t.Fatalf("%d turns stored, more than %d acknowledged plus one in flight per kill", len(stored), len(acked))
	}
}

// crashRun starts a child, lets it acknowledge a few stores, kills it at a
// random moment and returns the turns it acknowledged.
func crashRun(t *testing.T, child, wasm, db, key string, run int, rng *rand.Rand) []string {
	t.Helper()
	cmd := exec.Command(child, wasm, db, key, fmt.Sprint(run))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
	if hung.Load() {
		t.Fatalf("run %d: child made no progress for a minute; stderr:\n%s", run, stderr.String())
	}
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("run %d: child ended with %v, not killed; stderr:\n%s", run, err, stderr.String())
	}
	return acked
}
