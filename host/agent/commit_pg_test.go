package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// newPGCommitRig is a commitRig whose plugin keeps its rows in schema
// data<n> of the PostgreSQL database at dsn, with the sessions in the same
// database (one transaction; host schema host<n>) or in a session file.
func newPGCommitRig(t *testing.T, h *host.Host, wasm, dsn string, n int, sameDB bool) *commitRig {
	t.Helper()
	ctx := context.Background()
	name, data, hostSchema := fmt.Sprint("db", n), fmt.Sprint("data", n), fmt.Sprint("host", n)
	grant := pggrant.New(pggrant.Config{Name: name, AdminDSN: dsn, Schema: data, HostSchema: hostSchema})
	p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{grant}})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(ctx) })
	rig := &commitRig{model: &switchModel{}, plugin: p}
	if sameDB {
		st, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: name, Schema: hostSchema})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.Equal(t, txn.PostgresTarget(name), st.Target())
		rig.store = st
	} else {
		rig.store, err = store.NewDir(filepath.Join(t.TempDir(), "sessions"))
		require.NoError(t, err)
	}
	rig.rowsOf = func(t testing.TB) []string { return pgRows(t, dsn, data) }
	rig.agent, err = agent.New(agent.Config{
		Model:     rig.model,
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
		Saver:     rig.store,
	})
	require.NoError(t, err)
	return rig
}

// pgRows returns the texts of every message the sqlite plugin stored in
// schema of the PostgreSQL database at dsn, by session and in order.
func pgRows(t testing.TB, dsn, schema string) []string {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rs, err := conn.Query(ctx, `SELECT body FROM `+pgx.Identifier{schema, "messages"}.Sanitize()+` ORDER BY session, seq`)
	require.NoError(t, err)
	bodies, err := pgx.CollectRows(rs, pgx.RowTo[string])
	require.NoError(t, err)
	var rows []string
	for _, b := range bodies {
		var m abi.Message
		require.NoError(t, json.Unmarshal([]byte(b), &m))
		rows = append(rows, string(m.Role)+":"+m.TextContent())
	}
	return rows
}

// postgresHost starts a PostgreSQL server for the test and returns its
// DSN and a host closed with the test.
func postgresHost(t *testing.T) (string, *host.Host) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.Start(t).DSN("postgres")
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(ctx) })
	return dsn, h
}

// TestRunCommitsOncePostgres is TestRunCommitsOnce with the plugin's data in
// PostgreSQL: the session in the same database (one transaction) and in a
// session file (the journal protocol).
func TestRunCommitsOncePostgres(t *testing.T) {
	dsn, h := postgresHost(t)
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	n := 0
	for _, kind := range []struct {
		name   string
		sameDB bool
	}{{"postgres-same-db", true}, {"file+postgres", false}} {
		for _, fault := range commitFaults {
			n++
			t.Run(kind.name+"/"+string(fault), func(t *testing.T) {
				checkFault(t, newPGCommitRig(t, h, wasm, dsn, n, kind.sameDB), fault)
			})
		}
	}
}
