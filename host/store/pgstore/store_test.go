package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/pgcap"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/storetest"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// One server for the package (starting one takes seconds); each test
// works in a schema of its own, which also exercises Config.Schema. The
// tests run as a superuser and again as an admin with CREATEROLE that owns
// its database but is not a superuser, as managed services give; conn
// inspects as the superuser either way.
func TestPostgreSQL(t *testing.T) {
	srv := pgtest.Start(t)
	for _, mode := range []struct{ name, db, dsn string }{
		{"superuser admin", "postgres", srv.DSN("postgres")},
		{"createrole admin", "managed", srv.Admin(t, "managed")},
	} {
		t.Run(mode.name, func(t *testing.T) { testStore(t, srv, mode.dsn, srv.DSN(mode.db)) })
	}
}

func testStore(t *testing.T, srv *pgtest.Server, dsn, superDSN string) {
	schemas := 0
	newSchema := func() string { schemas++; return fmt.Sprintf("case %d", schemas) }
	open := func(t *testing.T, schema string) *pgstore.Store {
		t.Helper()
		s, err := pgstore.OpenConfig(t.Context(), pgstore.Config{DSN: dsn, Schema: schema})
		require.NoError(t, err, "server log:\n%s", srv.Log())
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
	conn, err := pgx.Connect(t.Context(), superDSN)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })

	// Each handle is a Store with a pool of its own, as another host
	// would have.
	t.Run("contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) func(*testing.T) store.Store {
			schema := newSchema()
			return func(t *testing.T) store.Store { return open(t, schema) }
		})
	})

	t.Run("default schema, others untouched", func(t *testing.T) {
		ctx := t.Context()
		for _, q := range []string{
			`CREATE SCHEMA other`,
			`CREATE TABLE other.sessions (id text, revision bigint, updated timestamptz, data json)`,
			`INSERT INTO other.sessions VALUES ('s', 1, now(), '{}')`,
			`CREATE TABLE public.sessions (id text)`,
		} {
			_, err := conn.Exec(ctx, q)
			require.NoError(t, err, q)
		}
		st, err := pgstore.Open(ctx, dsn)
		require.NoError(t, err)
		defer st.Close()
		s := session.New()
		s.SessionID, s.Revision = "s", 5
		require.NoError(t, st.Save(ctx, s))
		require.NoError(t, st.Delete(ctx, "s", 5))
		require.NoError(t, st.Save(ctx, s))

		var tables []string
		rows, err := conn.Query(ctx, `SELECT table_schema || '.' || table_name FROM information_schema.tables
			WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_schema NOT LIKE 'case %' ORDER BY 1`)
		require.NoError(t, err)
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"other.sessions", "public.sessions", "wasmhist.host_lock", "wasmhist.sessions", "wasmhist.store_version"}, tables)
		var other string
		require.NoError(t, conn.QueryRow(ctx, `SELECT string_agg(id || '@' || revision || data::text, ',') FROM other.sessions`).Scan(&other))
		require.Equal(t, "s@1{}", other, "another schema's table changed")
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM public.sessions`).Scan(&n))
		require.Zero(t, n, "the public schema's table changed")
		var rev int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT revision FROM wasmhist.sessions WHERE id = 's'`).Scan(&rev))
		require.Equal(t, int64(5), rev)
	})

	// A row that is not a valid session is reported with the row and
	// where in its JSON the problem is, not handed to the agent.
	t.Run("corrupt row reported", func(t *testing.T) {
		tests := []struct {
			name, data string
			revision   int64
			want       []string
		}{
			{name: "schema", revision: 1, data: `{"schema_version":1,"session_id":"bad","revision":1,"state":{"p":{"provider":"memory","state_version":1}}}`,
				want: []string{`row "bad"`, "/state/p", "data"}},
			{name: "revision column disagrees", revision: 2, data: `{"schema_version":1,"session_id":"bad","revision":1}`,
				want: []string{`row "bad"`, "revision 2", "revision 1"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				schema := newSchema()
				st := open(t, schema)
				_, err := conn.Exec(t.Context(), `INSERT INTO `+pgx.Identifier{schema, "sessions"}.Sanitize()+` VALUES ('bad', $1, now(), $2)`, tt.revision, tt.data)
				require.NoError(t, err)
				_, err = st.Load(t.Context(), "bad")
				require.ErrorIs(t, err, session.ErrInvalid)
				for _, w := range tt.want {
					require.ErrorContains(t, err, w)
				}
			})
		}
	})

	t.Run("invalid session refused", func(t *testing.T) {
		st := open(t, newSchema())
		for name, s := range map[string]*session.Session{
			"schema version 0": {SessionID: "x", Revision: 1},
			"empty id":         {SchemaVersion: session.SchemaVersion, Revision: 1},
		} {
			require.ErrorIs(t, st.Save(t.Context(), s), session.ErrInvalid, name)
		}
		infos, err := st.List(t.Context())
		require.NoError(t, err)
		require.Empty(t, infos, "a refused session was stored")
	})

	// A schema a later version migrated is refused rather than written
	// in a layout that version no longer reads.
	t.Run("newer schema refused", func(t *testing.T) {
		schema := newSchema()
		open(t, schema)
		// 2 is the same tables after a rotation of the host key.
		_, err := conn.Exec(t.Context(), `UPDATE `+pgx.Identifier{schema, "store_version"}.Sanitize()+` SET version = 2`)
		require.NoError(t, err)
		st, err := pgstore.OpenConfig(t.Context(), pgstore.Config{DSN: dsn, Schema: schema})
		require.NoError(t, err)
		st.Close()
		_, err = conn.Exec(t.Context(), `UPDATE `+pgx.Identifier{schema, "store_version"}.Sanitize()+` SET version = 3`)
		require.NoError(t, err)
		_, err = pgstore.OpenConfig(t.Context(), pgstore.Config{DSN: dsn, Schema: schema})
		require.ErrorContains(t, err, "version 3, newer than this program's 2")
	})

	// Hosts take turns on a row no plugin role may lock: a session holding
	// the key of the advisory lock hosts once took (a plugin may compute
	// it) delays no host's Open, and hosts opening a new schema together
	// all succeed.
	t.Run("open while the old advisory key is held", func(t *testing.T) {
		schema := newSchema()
		holder, err := pgx.Connect(t.Context(), dsn)
		require.NoError(t, err)
		defer holder.Close(context.Background())
		_, err = holder.Exec(t.Context(), `SELECT pg_advisory_lock(hashtext('wasmhist pgstore ' || $1))`, schema)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() {
				s, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Schema: schema})
				if err == nil {
					s.Close()
				}
				errs <- err
			}()
		}
		for range cap(errs) {
			require.NoError(t, <-errs)
		}
	})

	// With the same Name as a sql grant on the database, the store's
	// Target is the grant's txn target, and a run's plugin writes and its
	// session row (written through the Txn into this store's table)
	// commit together.
	t.Run("one transaction with the sql capability", func(t *testing.T) {
		ctx := t.Context()
		st, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Schema: "runs", Name: "main"})
		require.NoError(t, err)
		defer st.Close()
		require.Equal(t, "postgres:main", st.Target())
		require.Equal(t, txn.PostgresTarget("main"), st.Target())
		unnamed := open(t, newSchema())
		require.Empty(t, unnamed.Target(), "a store without a Name matches no target")

		caps := pgcap.NewStore()
		t.Cleanup(func() { caps.Close() })
		backends := capability.NewBackends([]capability.Kind{{Func: pgcap.Kind.Func, Engine: pgcap.Engine,
			NewBackend: func() (capability.Backend, error) { return caps, nil }}})
		grant := pgcap.NewGrant(pgcap.Config{Name: "main", AdminDSN: dsn, Schema: "plugin", HostSchema: "runs"})
		run := func(t *testing.T, rev int64, value int, commit bool) error {
			tx := txn.New()
			tctx := txn.With(ctx, tx)
			call := capability.NewCall(tctx, "p", []capability.Grant{grant}, backends)
			_, err := pgcap.Kind.Func.Call(tctx, call, []byte(fmt.Sprintf(
				`{"statements":[{"sql":"CREATE TABLE IF NOT EXISTS t (x int)"},{"sql":"INSERT INTO t VALUES (%d)"}]}`, value)))
			require.NoError(t, err)
			require.NoError(t, call.End(tctx, true))
			s := session.New()
			s.SessionID, s.Revision = "r", rev
			data, err := session.Encode(s)
			require.NoError(t, err)
			if err := tx.Put(ctx, st.Target(), txn.Sessions, "r", rev, data); err != nil {
				tx.Rollback(ctx)
				return err
			}
			_, err = st.Load(ctx, "r")
			if rev == 1 {
				require.ErrorIs(t, err, session.ErrNotFound, "visible before the commit")
			}
			if !commit {
				return tx.Rollback(ctx)
			}
			return tx.Commit(ctx)
		}
		values := func(t *testing.T) string {
			var v string
			require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(string_agg(x::text, ',' ORDER BY x), '') FROM plugin.t`).Scan(&v))
			return v
		}
		require.NoError(t, run(t, 1, 1, true))
		got, err := st.Load(ctx, "r")
		require.NoError(t, err)
		require.Equal(t, int64(1), got.Revision)
		require.Equal(t, "1", values(t))

		require.NoError(t, run(t, 2, 2, false), "rolled back")
		require.Equal(t, "1", values(t))
		got, err = st.Load(ctx, "r")
		require.NoError(t, err)
		require.Equal(t, int64(1), got.Revision)

		require.ErrorIs(t, run(t, 1, 3, true), txn.ErrStale)
		require.Equal(t, "1", values(t), "the stale run's plugin write")

		// Save and the Txn check the same revision.
		s := session.New()
		s.SessionID, s.Revision = "r", 2
		require.NoError(t, st.Save(ctx, s))
		require.ErrorIs(t, run(t, 2, 4, true), txn.ErrStale)
		require.NoError(t, run(t, 3, 5, true))
		require.Equal(t, "1,5", values(t))
	})
}
