package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// maxTurnTrips bounds the round trips of one warm turn through the sqlite
// plugin on PostgreSQL with the session in the same database, and
// maxTurnSyncs its sync points (see pgtest.Proxy): the session row's load
// (1, the session store's); the check of what the database holds of the
// session (1: BEGIN, both host rows, ROLLBACK); provide, one statement
// (1, with BEGIN), and its COMMIT and reset (1, two sync points); store,
// a request of two statements (1, with BEGIN: a request's statements go
// in one round trip); the session row written after the plugin's part is
// settled (1); the COMMIT and reset (1, two sync points). The same
// statements written with pgx make 7 round trips (BenchmarkSQLTurn's
// native turn).
const (
	maxTurnTrips = 7
	maxTurnSyncs = 9
)

// TestTurnRoundTripsPostgres counts, through a proxy that reads the
// protocol, the round trips every connection of the host makes in one warm
// turn, and bounds them.
func TestTurnRoundTripsPostgres(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	proxy := srv.Proxy(t)
	dsn := proxy.DSN("postgres")
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(ctx) })
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	grant := pggrant.New(pggrant.Config{Name: "trips", AdminDSN: dsn, Schema: "data", HostSchema: "host"})
	p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Config: turnConfig, Grants: []host.Grant{grant}})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(ctx) })
	st, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: "trips", Schema: "host"})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a, err := agent.New(agent.Config{
		Model:     echoModel{},
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
		Saver:     st,
	})
	require.NoError(t, err)
	turn := func(i int) {
		s, err := st.Load(ctx, "s")
		if errors.Is(err, session.ErrNotFound) {
			s, err = session.New(), nil
			s.SessionID = "s"
		}
		require.NoError(t, err)
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, fmt.Sprint("line ", i))}, nil)
		require.NoError(t, err)
	}
	// The first turns create the tables and fill the pools.
	for i := range 3 {
		turn(i)
	}
	proxy.Trips()
	conns := proxy.Conns()
	turn(3)
	trips, syncs := proxy.Trips()
	t.Logf("%d round trips, %d sync points:\n%s", len(trips), syncs, strings.Join(trips, "\n"))
	require.Equal(t, conns, proxy.Conns(), "a warm turn opens no connection")
	require.LessOrEqual(t, len(trips), maxTurnTrips, "round trips of one warm turn:\n%s", strings.Join(trips, "\n"))
	require.LessOrEqual(t, syncs, maxTurnSyncs, "sync points of one warm turn:\n%s", strings.Join(trips, "\n"))
	require.Len(t, pgRows(t, srv.DSN("postgres"), "data"), 8)
}
