//go:build !wasip1

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// Fixture layout: 1000 sessions. The first measuredSessions hold
// measuredLength messages each, so provide returns the same 20 messages at
// every size and only the size of the database differs; the rest of the
// messages are spread evenly over the other sessions.
const (
	fixtureSessions  = 1000
	measuredSessions = 10
	measuredLength   = 40
	provideWindow    = 20
)

var fixtureSizes = []int{1_000, 100_000, 1_000_000}

func fixtureKey(i int) string { return fmt.Sprintf("%032x", i+1) }

var fixtureBody = strings.Repeat("lorem ipsum dolor sit amet ", 16)

func fixtureMessage(seq int) string {
	role := "user"
	if seq%2 == 0 {
		role = "assistant"
	}
	return fmt.Sprintf(`{"role":%q,"contents":[{"type":"text","text":"%d %s"}]}`, role, seq, fixtureBody)
}

// fixture returns a database with size messages, built once per size and
// kept under os.TempDir (a million rows take a while), with the schema the
// plugin itself created.
func fixture(b *testing.B, wasm string, size int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), "wasmhist-bench")
	path := filepath.Join(dir, fmt.Sprintf("sqlite-plugin-v1-%d.db", size))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	require.NoError(b, os.MkdirAll(dir, 0o755))
	tmp := filepath.Join(b.TempDir(), "fixture.db")
	// The plugin creates its schema on its first call.
	h, p := loadBench(b, wasm, tmp)
	_, err := p.StoreState(context.Background(), abi.SessionFacts{SessionID: "init", StateKey: "h"}, json.RawMessage(`{}`),
		[]json.RawMessage{json.RawMessage(fixtureMessage(1))}, nil)
	require.NoError(b, err)
	h.Close(context.Background())

	db, err := sql.Open("sqlite", "file:"+tmp)
	require.NoError(b, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	exec := func(q string, args ...any) {
		_, err := db.Exec(q, args...)
		require.NoError(b, err, q)
	}
	exec("PRAGMA synchronous=OFF")
	exec("DELETE FROM messages")
	exec("DELETE FROM sessions")
	tx, err := db.Begin()
	require.NoError(b, err)
	ins, err := tx.Prepare(`INSERT INTO messages (session, seq, role, body) VALUES (?, ?, ?, ?)`)
	require.NoError(b, err)
	rest := size - measuredSessions*measuredLength
	others := fixtureSessions - measuredSessions
	for s := range fixtureSessions {
		n := measuredLength
		if s >= measuredSessions {
			n = rest / others
			if s-measuredSessions < rest%others {
				n++
			}
		}
		for seq := 1; seq <= n; seq++ {
			role := "user"
			if seq%2 == 0 {
				role = "assistant"
			}
			_, err := ins.Exec(fixtureKey(s), seq, role, fixtureMessage(seq))
			require.NoError(b, err)
		}
		_, err := tx.Exec(`INSERT INTO sessions (key, last_seq) VALUES (?, ?)`, fixtureKey(s), n)
		require.NoError(b, err)
	}
	require.NoError(b, tx.Commit())
	exec("PRAGMA wal_checkpoint(TRUNCATE)")
	db.Close()
	require.NoError(b, os.Rename(tmp, path))
	return path
}

func loadBench(b *testing.B, wasm, db string) (*host.Host, *host.Plugin) {
	b.Helper()
	h, err := host.New(context.Background(), host.Config{})
	require.NoError(b, err)
	p, err := h.Load(context.Background(), host.File(wasm), host.LoadOptions{
		Config: json.RawMessage(fmt.Sprintf(`{"max_messages":%d}`, provideWindow)),
		Grants: []host.Grant{host.SQLGrant{Path: db}},
	})
	if err != nil {
		h.Close(context.Background())
	}
	require.NoError(b, err)
	return h, p
}

// parallel runs op b.N times over goroutines and reports operations per
// second; op gets the goroutine's number and the operation's.
func parallel(b *testing.B, goroutines int, op func(g, i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(g, i); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	require.Nil(b, failed.Load(), "an operation failed")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkProvide: provide returning the newest 20 messages of a session,
// through the plugin as wasm and the sql capability.
func BenchmarkProvide(b *testing.B) {
	wasm := sdktest.BuildPlugin(b, importPath)
	for _, size := range fixtureSizes {
		db := fixture(b, wasm, size)
		for _, goroutines := range []int{1, 2} {
			b.Run(fmt.Sprintf("messages=%d/goroutines=%d", size, goroutines), func(b *testing.B) {
				h, p := loadBench(b, wasm, db)
				defer h.Close(context.Background())
				parallel(b, goroutines, func(g, i int) error {
					s := (i*7 + g) % measuredSessions
					state := json.RawMessage(`{"session_key":"` + fixtureKey(s) + `"}`)
					history, _, err := p.ProvideState(context.Background(), abi.SessionFacts{SessionID: "bench", StateKey: "h"}, state, nil)
					if err == nil && len(history) != provideWindow {
						err = fmt.Errorf("provide returned %d messages", len(history))
					}
					return err
				})
			})
		}
	}
}

// BenchmarkStore: store of one turn (a user and an assistant message of
// ~500 bytes) into an existing session. The rows it adds are deleted
// afterwards, so the fixture keeps its size.
func BenchmarkStore(b *testing.B) {
	wasm := sdktest.BuildPlugin(b, importPath)
	q := json.RawMessage(fixtureMessage(1))
	a := json.RawMessage(fixtureMessage(2))
	for _, size := range fixtureSizes {
		db := fixture(b, wasm, size)
		for _, goroutines := range []int{1, 2} {
			b.Run(fmt.Sprintf("messages=%d/goroutines=%d", size, goroutines), func(b *testing.B) {
				h, p := loadBench(b, wasm, db)
				defer h.Close(context.Background())
				defer restoreFixture(b, db)
				parallel(b, goroutines, func(g, i int) error {
					s := (i*7 + g) % measuredSessions
					state := json.RawMessage(`{"session_key":"` + fixtureKey(s) + `"}`)
					_, err := p.StoreState(context.Background(), abi.SessionFacts{SessionID: "bench", StateKey: "h"}, state,
						[]json.RawMessage{q}, []json.RawMessage{a})
					return err
				})
			})
		}
	}
}

// restoreFixture removes what a store benchmark appended.
func restoreFixture(b *testing.B, path string) {
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(b, err)
	defer db.Close()
	for _, q := range []string{
		fmt.Sprintf(`DELETE FROM messages WHERE session IN (SELECT key FROM sessions LIMIT %d) AND seq > %d`, measuredSessions, measuredLength),
		fmt.Sprintf(`UPDATE sessions SET last_seq = %d WHERE key IN (SELECT key FROM sessions LIMIT %d)`, measuredLength, measuredSessions),
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		_, err := db.Exec(q)
		require.NoError(b, err, "restore fixture: %s", q)
	}
}
