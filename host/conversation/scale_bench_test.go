package conversation_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// BenchmarkScale imports a conversation of n messages (turns of a user
// line, a tool call, its result and an answer) into the sqlite plugin with
// the session store in the same database, on SQLite and on PostgreSQL,
// exports it (the portable document, counted and dropped), and forks it
// whole into a new session; it reports the time per message, which stays
// flat when each is linear in the history, and how far an export raised the
// process's peak resident memory.
func BenchmarkScale(b *testing.B) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(b, err)
	defer h.Close(ctx)
	wasm := host.File(sdktest.BuildPlugin(b, "../../plugins/sqlite"))
	var dsn string
	parent := b // the server lives as long as the whole benchmark
	engines := []struct {
		name string
		open func(b *testing.B, n int) (*host.Plugin, store.Store)
	}{
		{"sqlite", func(b *testing.B, n int) (*host.Plugin, store.Store) {
			db := filepath.Join(b.TempDir(), "h.db")
			p, err := h.Load(ctx, wasm, host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
			require.NoError(b, err)
			st, err := sqlitestore.Open(db)
			require.NoError(b, err)
			b.Cleanup(func() { st.Close(); p.Close(ctx) })
			return p, st
		}},
		{"postgres", func(b *testing.B, n int) (*host.Plugin, store.Store) {
			if dsn == "" {
				dsn = pgtest.Start(parent).DSN("postgres")
			}
			name := fmt.Sprint("db", n)
			// A page of 128 inserts is one sql request; its 2 s default
			// limit guards against runaway statements and is what a
			// request on a loaded machine can reach, so the benchmark,
			// which measures throughput, allows 30 s.
			limits := pggrant.Limits{Timeout: 30 * time.Second}
			p, err := h.Load(ctx, wasm, host.LoadOptions{Grants: []host.Grant{pggrant.New(pggrant.Config{Name: name, AdminDSN: dsn, Schema: "data" + name, HostSchema: "host" + name, Limits: limits})}})
			require.NoError(b, err)
			st, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: name, Schema: "host" + name})
			require.NoError(b, err)
			b.Cleanup(func() { st.Close(); p.Close(ctx) })
			return p, st
		}},
	}
	run := 0
	for _, e := range engines {
		for _, n := range []int{1_000, 10_000, 100_000} {
			msgs := turnsOfChat(n / 4)
			b.Run(fmt.Sprintf("%s/import/messages=%d", e.name, n), func(b *testing.B) {
				run++
				p, st := e.open(b, run)
				to := conversation.Target{Store: st, Plugins: map[string]*host.Plugin{key: p}}
				i := 0
				cpu := processCPU(b)
				for b.Loop() {
					i++
					_, err := conversation.Import(ctx, &session.Session{SessionID: fmt.Sprint("s", i)}, []conversation.SlotHistory{{Key: key, History: values(msgs)}}, to, nil)
					require.NoError(b, err)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
				b.ReportMetric(float64(cpu().Nanoseconds())/float64(b.N*n), "cpu-ns/msg")
			})
			b.Run(fmt.Sprintf("%s/export/messages=%d", e.name, n), func(b *testing.B) {
				run++
				p, st := e.open(b, run)
				plugins := map[string]*host.Plugin{key: p}
				src, err := conversation.Import(ctx, &session.Session{SessionID: "src"}, []conversation.SlotHistory{{Key: key, History: values(msgs)}}, conversation.Target{Store: st, Plugins: plugins}, nil)
				require.NoError(b, err)
				if e.name == "postgres" {
					// The import's new rows start the server's autovacuum,
					// which would otherwise run beside the export timed.
					conn, err := pgx.Connect(ctx, dsn)
					require.NoError(b, err)
					_, err = conn.Exec(ctx, "VACUUM ANALYZE")
					require.NoError(b, err)
					require.NoError(b, conn.Close(ctx))
				}
				cpu, peak := processCPU(b), peakRSS(b)
				var written int64
				for b.Loop() {
					w := &countingWriter{}
					_, err := conversation.Export(ctx, src, plugins, w)
					require.NoError(b, err)
					written = w.n
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
				b.ReportMetric(float64(cpu().Nanoseconds())/float64(b.N*n), "cpu-ns/msg")
				b.ReportMetric(float64(peak())/(1<<20), "peak-rss-growth-MiB")
				b.ReportMetric(float64(written)/(1<<20), "document-MiB")
			})
			b.Run(fmt.Sprintf("%s/fork/messages=%d", e.name, n), func(b *testing.B) {
				run++
				p, st := e.open(b, run)
				plugins := map[string]*host.Plugin{key: p}
				to := conversation.Target{Store: st, Plugins: plugins}
				src, err := conversation.Import(ctx, &session.Session{SessionID: "src"}, []conversation.SlotHistory{{Key: key, History: values(msgs)}}, to, nil)
				require.NoError(b, err)
				i := 0
				cpu := processCPU(b)
				for b.Loop() {
					i++
					_, err := conversation.Fork(ctx, src, plugins, 0, to, fmt.Sprint("f", i))
					require.NoError(b, err)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
				b.ReportMetric(float64(cpu().Nanoseconds())/float64(b.N*n), "cpu-ns/msg")
			})
		}
	}
}

// processCPU returns a function that tells the CPU time (user and system)
// the process used since processCPU was called: on SQLite the whole of an
// import's work, which a loaded machine's wall time blurs; on PostgreSQL
// the client's part only.
func processCPU(b *testing.B) func() time.Duration {
	used := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := used()
	return func() time.Duration { return used() - start }
}

// peakRSS returns a function that tells how far the process's peak
// resident memory rose since peakRSS was called.
func peakRSS(b *testing.B) func() int64 {
	peak := func() int64 {
		var ru syscall.Rusage
		require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return ru.Maxrss << 10 // KiB on Linux
	}
	start := peak()
	return func() int64 { return peak() - start }
}

// countingWriter counts what an export writes, and keeps none of it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
