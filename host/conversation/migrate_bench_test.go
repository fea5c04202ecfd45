package conversation_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// BenchmarkMigrate migrates 1,000 sessions of 20 messages each (five
// turns with a tool call) from SQLite (sqlitestore and the sqlite plugin
// on one file) to PostgreSQL (pgstore and the sqlite plugin on one
// database), each iteration into a fresh schema; it reports sessions per
// second.
func BenchmarkMigrate(b *testing.B) {
	const sessions, msgs = 1000, 20
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(b, err)
	defer h.Close(ctx)
	wasm := host.File(sdktest.BuildPlugin(b, "../../plugins/sqlite"))
	db := filepath.Join(b.TempDir(), "sessions.db")
	sp, err := h.Load(ctx, wasm, host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	require.NoError(b, err)
	src, err := sqlitestore.Open(db)
	require.NoError(b, err)
	defer src.Close()
	turn := func(id string, i int) []abi.Message {
		call := fmt.Sprintf("c-%s-%d", id, i)
		return []abi.Message{
			abi.NewMessage(abi.RoleUser, fmt.Sprintf("question %d of %s", i, id)),
			{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: call, Name: "lookup", Arguments: []byte(`{"q":"x"}`)}}},
			{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: call, Result: []byte(`{"found":"y"}`)}}},
			abi.NewMessage(abi.RoleAssistant, fmt.Sprintf("answer %d to %s", i, id)),
		}
	}
	for i := range sessions {
		id := fmt.Sprintf("s%04d", i)
		var ms []abi.Message
		for j := range msgs / 4 {
			ms = append(ms, turn(id, j)...)
		}
		_, err := conversation.Import(ctx, &session.Session{SessionID: id}, []conversation.SlotHistory{{Key: key, History: values(ms)}},
			conversation.Target{Store: src, Plugins: map[string]*host.Plugin{key: sp}}, nil)
		require.NoError(b, err)
	}
	dsn := pgtest.Start(b).DSN("postgres")
	from := conversation.Source{Store: src, Plugins: conversation.Plugins{key: sp}}
	var elapsed time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		name := fmt.Sprint("bench", i)
		dp, err := h.Load(ctx, wasm, host.LoadOptions{Grants: []host.Grant{pggrant.New(pggrant.Config{Name: name, AdminDSN: dsn, Schema: fmt.Sprint("data", i), HostSchema: fmt.Sprint("host", i)})}})
		require.NoError(b, err)
		dst, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: name, Schema: fmt.Sprint("host", i)})
		require.NoError(b, err)
		b.StartTimer()
		start := time.Now()
		done, err := conversation.Migrate(ctx, from, conversation.Destination{Store: dst, Plugins: conversation.Plugins{key: dp}}, nil)
		elapsed += time.Since(start)
		b.StopTimer()
		require.NoError(b, err)
		require.Len(b, done, sessions)
		dst.Close()
		dp.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(sessions*b.N)/elapsed.Seconds(), "sessions/s")
}
