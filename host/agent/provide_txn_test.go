package agent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// sqlhostile runs the SQL of its input's first message in provide, and
// stores nothing: a plugin that writes while the run loads history.
const sqlhostile = "../testdata/sqlhostile"

// sqlLine is the input that has sqlhostile run stmts in provide.
func sqlLine(t testing.TB, stmts ...string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"sql": stmts})
	require.NoError(t, err)
	return string(b)
}

// checkProvideInRun: the first turn creates a table in provide; the second
// inserts a row in provide and its model call fails. The row must be gone
// with the run and the session at its old revision; the retry, with the
// same run id, leaves the row exactly once.
func checkProvideInRun(t *testing.T, rig *commitRig, count func(t testing.TB) int) {
	t.Helper()
	_, err := rig.turn(t, "s", sqlLine(t, "CREATE TABLE seen (x text)"), "run-1")
	require.NoError(t, err)
	require.EqualValues(t, 1, rig.revision(t, "s"))
	require.Equal(t, 0, count(t))

	insert := sqlLine(t, "INSERT INTO seen VALUES ('provide')")
	rig.model.fail = true
	res, err := rig.turn(t, "s", insert, "run-2")
	rig.model.fail = false
	require.ErrorContains(t, err, "model down")
	require.Nil(t, res)
	require.Equal(t, 0, count(t), "a row written in provide outlived the failed run")
	require.EqualValues(t, 1, rig.revision(t, "s"), "the session after the failed run")

	res, err = rig.turn(t, "s", insert, "run-2")
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.Equal(t, 1, count(t), "the retry's row, once")
	require.EqualValues(t, 2, rig.revision(t, "s"))

	// A repeat of the committed run writes nothing.
	res, err = rig.turn(t, "s", insert, "run-2")
	require.NoError(t, err)
	require.True(t, res.Replayed)
	require.Equal(t, 1, count(t))
}

// TestProvideWritesBelongToTheRun: what a plugin writes in provide commits
// with the run or not at all, for every kind of session store.
func TestProvideWritesBelongToTheRun(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	wasm := sdktest.BuildPlugin(t, sqlhostile)
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			rig := newCommitRig(t, h, wasm, kind.open)
			checkProvideInRun(t, rig, func(t testing.TB) int {
				db, err := sql.Open("sqlite", "file:"+rig.db+"?mode=ro")
				require.NoError(t, err)
				defer db.Close()
				var n int
				require.NoError(t, db.QueryRow(`SELECT count(*) FROM seen`).Scan(&n))
				return n
			})
		})
	}
}

// TestProvideWritesBelongToTheRunPostgres is TestProvideWritesBelongToTheRun
// with the plugin's data in PostgreSQL, the session in the same database or
// in a session file.
func TestProvideWritesBelongToTheRunPostgres(t *testing.T) {
	ctx := context.Background()
	dsn, h := postgresHost(t)
	wasm := sdktest.BuildPlugin(t, sqlhostile)
	for n, kind := range []struct {
		name   string
		sameDB bool
	}{{"postgres-same-db", true}, {"file+postgres", false}} {
		t.Run(kind.name, func(t *testing.T) {
			rig := newPGCommitRig(t, h, wasm, dsn, n, kind.sameDB)
			checkProvideInRun(t, rig, func(t testing.TB) int {
				conn, err := pgx.Connect(ctx, dsn)
				require.NoError(t, err)
				defer conn.Close(ctx)
				var c int
				require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{fmt.Sprint("data", n), "seen"}.Sanitize()).Scan(&c))
				return c
			})
		})
	}
}

// TestProvideWritesCommitWithoutStoring: a run that stores nothing itself
// (per-service-call persistence left to the caller, whose stack lacks the
// middleware) still commits what a plugin wrote in provide when it
// succeeds.
func TestProvideWritesCommitWithoutStoring(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	dir := t.TempDir()
	db := filepath.Join(dir, "history.db")
	p, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, sqlhostile)), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	require.NoError(t, err)
	defer p.Close(ctx)
	rig := &commitRig{store: storeKinds[0].open(t, dir, db), db: db, model: &switchModel{}}
	rig.agent, err = agent.New(agent.Config{
		Model:                            rig.model,
		Providers:                        []agent.ProviderConfig{{Provider: p.Provider("history")}},
		Saver:                            rig.store,
		RequirePerServiceCallPersistence: true,
		UseClientAsIs:                    true,
	})
	require.NoError(t, err)
	_, err = rig.turn(t, "s", sqlLine(t, "CREATE TABLE seen (x text)", "INSERT INTO seen VALUES ('provide')"), "run-1")
	require.NoError(t, err)
	conn, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	require.NoError(t, err)
	defer conn.Close()
	var n int
	require.NoError(t, conn.QueryRow(`SELECT count(*) FROM seen`).Scan(&n))
	require.Equal(t, 1, n)
	require.EqualValues(t, 1, rig.revision(t, "s"))
}

// writerModel echoes; while probe is set it first tries to take the write
// lock of the SQLite file db from another connection, as another session's
// commit would, and records the error.
type writerModel struct {
	echoModel
	db    string
	probe bool
	err   error
}

func (m *writerModel) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	if m.probe {
		db, err := sql.Open("sqlite", "file:"+m.db+"?_pragma=busy_timeout(200)")
		if err == nil {
			_, err = db.Exec("BEGIN IMMEDIATE; ROLLBACK")
			db.Close()
		}
		m.err = err
	}
	return m.echoModel.Complete(ctx, req)
}

// TestProvideHoldsNoLockWithoutWrites: the sqlite plugin's provide on a
// fresh instance checks its schema under the write lock and writes
// nothing; the run then holds no lock across its model call, so another
// writer of the file is not kept waiting for the model.
func TestProvideHoldsNoLockWithoutWrites(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "history.db")
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	m := &writerModel{db: db}
	s := session.New()
	for turn := range 2 {
		// A new host each turn: a fresh instance, as a new process has.
		h, err := host.New(ctx, host.Config{})
		require.NoError(t, err)
		p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
		require.NoError(t, err)
		a, err := agent.New(agent.Config{Model: m, Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}}})
		require.NoError(t, err)
		m.probe = turn == 1
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, fmt.Sprint("line ", turn))}, nil)
		require.NoError(t, err)
		require.NoError(t, h.Close(ctx))
	}
	require.NoError(t, m.err, "another writer during the model call")
}
