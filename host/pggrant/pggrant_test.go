package pggrant_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/pgcap"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

const sqlhostile = "../testdata/sqlhostile"

// runSQL has the hostile plugin run statements in one provide call and
// returns the rows of each statement that returned some, as JSON text.
func runSQL(ctx context.Context, t *testing.T, p *host.Plugin, swallow bool, stmts ...string) ([]string, error) {
	t.Helper()
	cmd, err := json.Marshal(map[string]any{"sql": stmts, "swallow": swallow})
	require.NoError(t, err)
	msg, err := json.Marshal(abi.NewMessage(abi.RoleUser, string(cmd)))
	require.NoError(t, err)
	history, _, err := p.ProvideState(ctx, abi.SessionFacts{SessionID: "s", StateKey: "k"}, json.RawMessage(`{}`), []json.RawMessage{msg})
	var out []string
	for _, raw := range history {
		var m abi.Message
		require.NoError(t, json.Unmarshal(raw, &m))
		out = append(out, m.TextContent())
	}
	return out, err
}

type tenantKey struct{}

// TestPostgreSQL runs a plugin that tries to escape or exhaust the sql
// capability on PostgreSQL, through the host and WebAssembly: every
// attempt is refused with a typed error and the data stays intact. One
// server serves the package.
func TestPostgreSQL(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.DSN("postgres")
	admin, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	// Installed, so that the plugin is refused it by privilege.
	_, err = admin.Exec(t.Context(), "CREATE EXTENSION dblink SCHEMA public")
	require.NoError(t, err)
	value := func(t *testing.T, q string) string {
		t.Helper()
		var v string
		require.NoError(t, admin.QueryRow(context.Background(), q).Scan(&v), q)
		return v
	}
	wasm := sdktest.BuildPlugin(t, sqlhostile)
	// Compiled first, in a host of its own whose Close waits for the
	// compilation: the slow case's 300 ms are for its query, not for a
	// first use's calls on the interpreter, slower under the race detector.
	warm, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	_, err = warm.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{pggrant.New(pggrant.Config{Name: "main", AdminDSN: dsn, Schema: "mine"})}})
	require.NoError(t, err)
	require.NoError(t, warm.Close(t.Context()))
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	load := func(t *testing.T, cfg pggrant.Config, limits host.Limits) *host.Plugin {
		t.Helper()
		cfg.Name, cfg.AdminDSN = "main", dsn
		p, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{pggrant.New(cfg)}, Limits: limits})
		require.NoError(t, err)
		return p
	}

	t.Run("hostile", func(t *testing.T) {
		other := load(t, pggrant.Config{Schema: "theirs"}, host.Limits{})
		_, err := runSQL(t.Context(), t, other, false, "CREATE TABLE secret (x text)", "INSERT INTO secret VALUES ('their secret')")
		require.NoError(t, err)
		p := load(t, pggrant.Config{Schema: "mine", Limits: pggrant.Limits{Timeout: 300 * time.Millisecond, MaxRows: 1000}}, host.Limits{})
		_, err = runSQL(t.Context(), t, p, false, "CREATE TABLE secret (x text)", "INSERT INTO secret VALUES ('mine')")
		require.NoError(t, err)
		slow := load(t, pggrant.Config{Schema: "mine", Limits: pggrant.Limits{Timeout: time.Hour}}, host.Limits{CallTimeout: 300 * time.Millisecond})
		_, err = admin.Exec(t.Context(), `INSERT INTO wasmhist.sessions VALUES ('s1', 1, now(), '{}')`)
		require.NoError(t, err)

		const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
		tests := []struct {
			name    string
			plugin  *host.Plugin
			stmts   []string
			swallow bool
			want    error
		}{
			{name: "another grant's schema", stmts: []string{"SELECT * FROM theirs.secret"}, want: abi.ErrPermissionDenied},
			{name: "the session rows", stmts: []string{"SELECT * FROM wasmhist.sessions"}, want: abi.ErrPermissionDenied},
			{name: "forge a session row", stmts: []string{"SELECT wasmhist.put_row('', 'sessions', 's1', 2, '{}')"}, want: abi.ErrPermissionDenied},
			{name: "pg_read_file", stmts: []string{"SELECT pg_read_file('/etc/passwd')"}, want: abi.ErrPermissionDenied},
			{name: "copy to program", stmts: []string{"COPY secret TO PROGRAM 'true'"}, want: abi.ErrPermissionDenied},
			{name: "copy to a file", stmts: []string{"COPY secret TO '/tmp/wasmhist-secret'"}, want: abi.ErrPermissionDenied},
			{name: "set role", stmts: []string{"SET ROLE postgres"}, want: abi.ErrPermissionDenied},
			{name: "set session authorization", stmts: []string{"SET SESSION AUTHORIZATION postgres"}, want: abi.ErrPermissionDenied},
			{name: "create extension", stmts: []string{"CREATE EXTENSION postgres_fdw"}, want: abi.ErrPermissionDenied},
			{name: "dblink", stmts: []string{"SELECT public.dblink_exec('dbname=postgres', 'INSERT INTO mine.secret VALUES (''outside'')')"}, want: abi.ErrPermissionDenied},
			{name: "share the schema", stmts: []string{"GRANT USAGE ON SCHEMA mine TO PUBLIC", "INSERT INTO secret VALUES ('shared')"}, want: pgcap.ErrShared},
			{name: "a large object", stmts: []string{"SELECT lo_from_bytea(0, 'outside the caps')"}, want: pgcap.ErrShared},
			{name: "set its own password", stmts: []string{"ALTER ROLE CURRENT_USER PASSWORD 'known'"}, want: pgcap.ErrRoleChanged},
			{name: "temp table", stmts: []string{"CREATE TEMP TABLE t (x int)"}, want: abi.ErrPermissionDenied},
			{name: "commit early", stmts: []string{"INSERT INTO secret VALUES ('early')", "COMMIT"}, want: abi.ErrPermissionDenied},
			{name: "commit early, swallowed", stmts: []string{"INSERT INTO secret VALUES ('early')", "COMMIT"}, swallow: true, want: abi.ErrPermissionDenied},
			{name: "rollback and write", stmts: []string{"ROLLBACK", "INSERT INTO secret VALUES ('autocommit')"}, swallow: true, want: abi.ErrPermissionDenied},
			{name: "runaway query", stmts: []string{"SELECT pg_sleep(10)"}, want: abi.ErrResourceExhausted},
			{name: "runaway query swallowed", stmts: []string{"INSERT INTO secret VALUES ('lost')", endless + "SELECT count(*) FROM c"}, swallow: true, want: abi.ErrResourceExhausted},
			{name: "runaway past the call deadline", plugin: slow, stmts: []string{endless + "SELECT count(*) FROM c"}, want: host.ErrTimeout},
			{name: "huge result set", stmts: []string{endless + "SELECT x FROM c"}, want: abi.ErrResourceExhausted},
			{name: "huge values", stmts: []string{"SELECT repeat('x', 1000000) FROM generate_series(1, 100)"}, want: abi.ErrResourceExhausted},
			{name: "drop and fail", stmts: []string{"DROP TABLE secret", "SELECT nonsense("}, want: abi.ErrInvalidArgument},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				pl := tt.plugin
				if pl == nil {
					pl = p
				}
				start := time.Now()
				_, err := runSQL(t.Context(), t, pl, tt.swallow, tt.stmts...)
				require.ErrorIs(t, err, tt.want)
				assert.Less(t, time.Since(start), 10*time.Second, "refusal took too long")
				assert.Equal(t, "mine", value(t, "SELECT string_agg(x, ',') FROM mine.secret"))
				assert.Equal(t, "their secret", value(t, "SELECT string_agg(x, ',') FROM theirs.secret"))
				assert.Equal(t, "1 {}", value(t, "SELECT revision || ' ' || data FROM wasmhist.sessions WHERE id = 's1'"))
			})
		}
		t.Run("the other schema is not visible", func(t *testing.T) {
			got, err := runSQL(t.Context(), t, p, false, "SELECT x FROM secret", "SELECT table_name FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")
			require.NoError(t, err)
			assert.NotContains(t, strings.Join(got, " "), "their")
		})
	})

	t.Run("per tenant", func(t *testing.T) {
		p := load(t, pggrant.Config{Schema: "app", TenantFunc: func(ctx context.Context) (string, error) {
			tenant, ok := ctx.Value(tenantKey{}).(string)
			if !ok {
				return "", errors.New("no tenant in context")
			}
			return tenant, nil
		}}, host.Limits{})
		for _, tenant := range []string{"acme", "globex"} {
			ctx := context.WithValue(t.Context(), tenantKey{}, tenant)
			_, err := runSQL(ctx, t, p, false, "CREATE TABLE secret (x text)", "INSERT INTO secret VALUES ('"+tenant+"')")
			require.NoError(t, err)
		}
		// Schema names do not say the tenant; the operator finds them in
		// the host schema's tenants table.
		schema := func(tenant string) string {
			return value(t, "SELECT schema FROM wasmhist.tenants WHERE prefix = 'app' AND tenant = '"+tenant+"'")
		}
		ctx := context.WithValue(t.Context(), tenantKey{}, "acme")
		_, err := runSQL(ctx, t, p, false, "SELECT x FROM "+schema("globex")+".secret")
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		assert.Equal(t, "acme", value(t, "SELECT x FROM "+schema("acme")+".secret"))
		assert.Equal(t, "globex", value(t, "SELECT x FROM "+schema("globex")+".secret"))
		_, err = runSQL(t.Context(), t, p, false, "SELECT 1")
		require.ErrorContains(t, err, "no tenant")
	})

	t.Run("next to sqlgrant", func(t *testing.T) {
		// Both engines in one Host: each grant reaches its own.
		lite, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: t.TempDir() + "/x.db"})}})
		require.NoError(t, err)
		got, err := runSQL(t.Context(), t, lite, false, "SELECT sqlite_version() IS NOT NULL")
		require.NoError(t, err)
		assert.Contains(t, strings.Join(got, " "), "1")
		pg := load(t, pggrant.Config{Schema: "both"}, host.Limits{})
		got, err = runSQL(t.Context(), t, pg, false, "SELECT current_schema()")
		require.NoError(t, err)
		assert.Contains(t, strings.Join(got, " "), "both")
	})

	t.Run("a grant without a name", func(t *testing.T) {
		p, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{pggrant.New(pggrant.Config{AdminDSN: dsn, Schema: "x"})}})
		require.NoError(t, err)
		_, err = runSQL(t.Context(), t, p, false, "SELECT 1")
		require.ErrorContains(t, err, "no Name")
	})

	// Last: the host h holds the key it replaces.
	t.Run("a rotation of the host key", func(t *testing.T) {
		p := load(t, pggrant.Config{Schema: "rot"}, host.Limits{})
		_, err := runSQL(t.Context(), t, p, false, "CREATE TABLE m (x text)")
		require.NoError(t, err)
		before := value(t, "SELECT key FROM wasmhist.host_key")
		rot, err := pggrant.RotateKey(t.Context(), dsn, "")
		require.NoError(t, err)
		assert.GreaterOrEqual(t, rot.Roles, 1)
		assert.NotEqual(t, before, value(t, "SELECT key FROM wasmhist.host_key"))
		// The host that held the old key fails (its backend ended, then
		// the key refused, which an embedder can test for) and recovers.
		var errs []error
		for len(errs) < 3 {
			_, err := runSQL(t.Context(), t, p, false, "INSERT INTO m VALUES ('after')")
			if err == nil {
				break
			}
			errs = append(errs, err)
		}
		require.Less(t, len(errs), 3, "%v", errs)
		require.NotEmpty(t, errs, "the old key served a write")
		assert.ErrorIs(t, errs[len(errs)-1], pggrant.ErrKeyRotated)
		assert.Equal(t, "1", value(t, "SELECT count(*)::text FROM rot.m"))
	})
	assert.Equal(t, "postgres:main", txn.PostgresTarget("main"))
}
