package main

import (
	"bufio"
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// messagesOf yields n messages of a conversation with tool calls, 4 a
// turn: input, call, result, answer.
func messagesOf(id string, n int) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		for i := 0; i < n; i++ {
			turn := fmt.Sprintf("%s-%d", id, i/4)
			var m abi.Message
			switch i % 4 {
			case 0:
				m = abi.NewMessage(abi.RoleUser, "question "+turn)
			case 1:
				m = abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c-" + turn, Name: "lookup", Arguments: []byte(`{}`)}}}
			case 2:
				m = abi.Message{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: "c-" + turn, Result: []byte(`"found"`)}}}
			case 3:
				m = abi.NewMessage(abi.RoleAssistant, "answer "+turn)
			}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// seedSQLite writes sessions of msgs messages each into the SQLite store
// path, their history through the sqlite plugin on the same file.
func seedSQLite(t testing.TB, h *host.Host, path string, sessions, msgs int) {
	t.Helper()
	ctx := context.Background()
	// Seeding is the test's setup, not what it tests: a page's request
	// may take longer than the 2 s default on a loaded machine.
	slow := sqlgrant.Limits{Timeout: 30 * time.Second}
	p, err := h.Load(ctx, host.File(filepath.Join(pluginDir, "sqlite.wasm")), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: path, Limits: slow})}})
	require.NoError(t, err)
	defer p.Close(ctx)
	st, err := sqlitestore.Open(path)
	require.NoError(t, err)
	defer st.Close()
	for i := range sessions {
		id := fmt.Sprintf("s%04d", i)
		_, err := conversation.Import(ctx, &session.Session{SessionID: id, Revision: int64(1 + i%3)},
			[]conversation.SlotHistory{{Key: "history", History: messagesOf(id, msgs)}},
			conversation.Target{Store: st, Plugins: map[string]*host.Plugin{"history": p}}, nil)
		require.NoError(t, err)
	}
}

// TestSessionMigrateUnderKill: a migration from SQLite to PostgreSQL is
// killed (SIGKILL) at random points, again and again; after every kill
// each session the destination holds is whole (its revision, every
// message), no row of the plugin's tables belongs to a session the
// destination does not hold, and a last run completes the migration.
func TestSessionMigrateUnderKill(t *testing.T) {
	t.Parallel()
	const sessions, msgs = 24, 300 // two pages a session: a kill may fall between them
	ctx := context.Background()
	srv := pgtest.Start(t)
	dsn := srv.DSN("postgres")
	dir := t.TempDir()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	seedSQLite(t, h, filepath.Join(dir, "sessions.db"), sessions, msgs)

	dst, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: "postgres"})
	require.NoError(t, err)
	defer dst.Close()
	pp, err := h.Load(ctx, host.File(filepath.Join(pluginDir, "sqlite.wasm")), host.LoadOptions{Grants: []host.Grant{
		pggrant.New(pggrant.Config{Name: "postgres", AdminDSN: dsn, Schema: pgPluginSchema})}})
	require.NoError(t, err)
	defer pp.Close(ctx)

	// check asserts the invariant and returns how many sessions are there.
	check := func(t *testing.T) int {
		t.Helper()
		infos, err := dst.List(ctx)
		require.NoError(t, err)
		for _, info := range infos {
			s, err := dst.Load(ctx, info.SessionID)
			require.NoError(t, err)
			var want int64
			_, err = fmt.Sscanf(info.SessionID, "s%04d", &want)
			require.NoError(t, err)
			assert.Equal(t, 1+want%3, s.Revision, "revision of %s", s.SessionID)
			var got []abi.Message
			cursor := ""
			for {
				page, next, err := pp.List(ctx, s, "history", cursor, 500)
				require.NoError(t, err)
				got = append(got, page...)
				if next == "" {
					break
				}
				cursor = next
			}
			var all []abi.Message
			for m := range messagesOf(s.SessionID, msgs) {
				all = append(all, m)
			}
			require.Equal(t, len(all), len(got), "messages of %s", s.SessionID)
			assert.Equal(t, all[len(all)-1].TextContent(), got[len(got)-1].TextContent())
		}
		// No rows of a session the store does not hold.
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		var rows, keys int
		err = conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT session) FROM `+pgPluginSchema+`.messages`).Scan(&rows, &keys)
		if err == nil {
			assert.Equal(t, len(infos)*msgs, rows, "message rows for %d sessions", len(infos))
			assert.Equal(t, len(infos), keys, "sessions with rows")
		} else {
			assert.Contains(t, err.Error(), "does not exist", "no table before the first commit")
			assert.Empty(t, infos)
		}
		return len(infos)
	}

	r := invocation{dir: dir, env: []string{postgresDSNEnv + "=" + dsn}}
	killed := 0
	for round := 0; round < 6; round++ {
		cmd := exec.Command(binary, "session", "migrate", "--from", "sessions.db", "--to", "postgres")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), pluginDirEnv+"="+pluginDir, postgresDSNEnv+"="+dsn)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		// Kill after a random number of lines (sessions done) and a
		// random moment into the next: a point between two sessions,
		// inside one's import, or inside its commit.
		lines := 1 + rand.IntN(3)
		sc := bufio.NewScanner(out)
		for i := 0; i < lines && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "copied ") {
				i++
			}
		}
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond) // a random kill point, not a wait for anything
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		for sc.Scan() {
		}
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
			killed++
		}
		n := check(t)
		t.Logf("round %d: killed %d copies in; %d of %d sessions in the destination", round, lines, n, sessions)
	}
	assert.Positive(t, killed, "no run was killed before it finished")
	out := r.ok(t, "session", "migrate", "--from", "sessions.db", "--to", "postgres")
	assert.Contains(t, out, fmt.Sprintf("migrated %d sessions", sessions))
	assert.Contains(t, out, "0 diverged")
	assert.Equal(t, sessions, check(t))
}
