package sqlgrant_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

const sqlhostile = "../testdata/sqlhostile"

func newHost(t *testing.T) *host.Host {
	t.Helper()
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// hostilePlugin loads testdata/sqlhostile granted sql on db.
func hostilePlugin(t *testing.T, h *host.Host, db string, cfg sqlgrant.Config, limits host.Limits) *host.Plugin {
	t.Helper()
	wasm := sdktest.BuildPlugin(t, sqlhostile)
	cfg.Path = db
	p, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(cfg)}, Limits: limits})
	require.NoError(t, err)
	return p
}

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

// checkDatabase opens path outside the host and checks it is intact and
// holds want in table secret.
func checkDatabase(t *testing.T, path, want string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	var ok string
	require.NoError(t, db.QueryRow("PRAGMA integrity_check").Scan(&ok))
	require.Equal(t, "ok", ok, "integrity_check of %s", path)
	var got string
	require.NoError(t, db.QueryRow("SELECT group_concat(x, ',') FROM (SELECT x FROM secret ORDER BY x)").Scan(&got))
	require.Equal(t, want, got, "secret of %s", path)
}

// TestSQLHostile runs a plugin that tries to escape or exhaust the sql
// capability. Every attempt is refused with a typed error, and both its own
// database and another plugin's stay intact.
func TestSQLHostile(t *testing.T) {
	dir := t.TempDir()
	mine, theirs := filepath.Join(dir, "mine.db"), filepath.Join(dir, "theirs.db")
	// Compiled first, in a host of its own whose Close waits for the
	// compilation: the slow case's 300 ms are for its query, not for a
	// first use's calls on the interpreter, slower under the race detector.
	warm := newHost(t)
	hostilePlugin(t, warm, filepath.Join(dir, "warm.db"), sqlgrant.Config{}, host.Limits{})
	require.NoError(t, warm.Close(t.Context()))
	h := newHost(t)
	// Another plugin's database, with data the hostile one wants.
	other := hostilePlugin(t, h, theirs, sqlgrant.Config{}, host.Limits{})
	_, err := runSQL(t.Context(), t, other, false, "CREATE TABLE secret(x)", "INSERT INTO secret VALUES ('their secret')")
	require.NoError(t, err)
	p := hostilePlugin(t, h, mine, sqlgrant.Config{Limits: sqlgrant.Limits{Timeout: 300 * time.Millisecond, MaxRows: 1000}}, host.Limits{})
	_, err = runSQL(t.Context(), t, p, false, "CREATE TABLE secret(x)", "INSERT INTO secret VALUES ('mine')")
	require.NoError(t, err)
	// Only the call's own deadline stops this one.
	slow := hostilePlugin(t, h, mine, sqlgrant.Config{Limits: sqlgrant.Limits{Timeout: time.Hour}}, host.Limits{CallTimeout: 300 * time.Millisecond})

	const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
	tests := []struct {
		name    string
		plugin  *host.Plugin
		stmts   []string
		swallow bool
		want    error
	}{
		{name: "attach another plugin's database", stmts: []string{"ATTACH DATABASE '" + theirs + "' AS o"}, want: abi.ErrPermissionDenied},
		{name: "attach by uri", stmts: []string{"ATTACH 'file:" + theirs + "?mode=ro' AS o"}, want: abi.ErrPermissionDenied},
		{name: "attach a new file", stmts: []string{"ATTACH '" + filepath.Join(dir, "new.db") + "' AS n"}, want: abi.ErrPermissionDenied},
		{name: "vacuum into a file", stmts: []string{"VACUUM INTO '" + filepath.Join(dir, "copy.db") + "'"}, want: abi.ErrInvalidArgument},
		{name: "load an extension", stmts: []string{"SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')"}, want: abi.ErrPermissionDenied},
		{name: "read raw pages", stmts: []string{"SELECT data FROM sqlite_dbpage"}, want: abi.ErrPermissionDenied},
		{name: "overwrite raw pages", stmts: []string{"UPDATE sqlite_dbpage SET data = zeroblob(4096)"}, want: abi.ErrPermissionDenied},
		{name: "turn off synchronous", stmts: []string{"PRAGMA synchronous = OFF"}, want: abi.ErrPermissionDenied},
		{name: "writable schema", stmts: []string{"PRAGMA writable_schema = ON"}, want: abi.ErrPermissionDenied},
		{name: "commit early", stmts: []string{"INSERT INTO secret VALUES ('early')", "COMMIT"}, want: abi.ErrPermissionDenied},
		{name: "runaway query", stmts: []string{endless + "SELECT count(*) FROM c"}, want: abi.ErrResourceExhausted},
		{name: "runaway query swallowed", stmts: []string{"INSERT INTO secret VALUES ('lost')", endless + "SELECT count(*) FROM c"}, swallow: true, want: abi.ErrResourceExhausted},
		{name: "runaway past the call deadline", plugin: slow, stmts: []string{endless + "SELECT count(*) FROM c"}, want: host.ErrTimeout},
		{name: "huge result set", stmts: []string{endless + "SELECT x FROM c"}, want: abi.ErrResourceExhausted},
		{name: "huge values", stmts: []string{endless + "SELECT zeroblob(1000000) FROM c LIMIT 100"}, want: abi.ErrResourceExhausted},
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
			checkDatabase(t, mine, "mine")
			checkDatabase(t, theirs, "their secret")
		})
	}
	t.Run("the other database is not visible", func(t *testing.T) {
		got, err := runSQL(t.Context(), t, p, false, "SELECT x FROM secret", "SELECT name FROM sqlite_schema")
		require.NoError(t, err)
		assert.NotContains(t, strings.Join(got, " "), "their")
	})
}

type tenantKey struct{}

// perTenant chooses the file of a call from the tenant in its context.
func perTenant(dir string) sqlgrant.Config {
	return sqlgrant.Config{PathFunc: func(ctx context.Context) (string, error) {
		tenant, ok := ctx.Value(tenantKey{}).(string)
		if !ok {
			return "", errors.New("no tenant in context")
		}
		return filepath.Join(dir, tenant+".db"), nil
	}}
}

// TestSQLGrantPerTenant: a PathFunc chooses the database per call from the
// caller's context, so one loaded plugin keeps tenants in separate files.
func TestSQLGrantPerTenant(t *testing.T) {
	h := newHost(t)
	dir := t.TempDir()
	wasm := sdktest.BuildPlugin(t, sqlhostile)
	p, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(perTenant(dir))}})
	require.NoError(t, err)
	for _, tenant := range []string{"acme", "globex"} {
		ctx := context.WithValue(t.Context(), tenantKey{}, tenant)
		_, err := runSQL(ctx, t, p, false, "CREATE TABLE secret(x)", "INSERT INTO secret VALUES ('"+tenant+"')")
		require.NoError(t, err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		checkDatabase(t, filepath.Join(dir, tenant+".db"), tenant)
	}
	_, err = runSQL(t.Context(), t, p, false, "SELECT 1")
	require.Error(t, err, "a call without a tenant reached a database")
}

// TestGrantWithoutPath: a grant naming no file fails the call that uses it.
func TestGrantWithoutPath(t *testing.T) {
	h := newHost(t)
	wasm := sdktest.BuildPlugin(t, sqlhostile)
	p, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{})}})
	require.NoError(t, err)
	_, err = runSQL(t.Context(), t, p, false, "SELECT 1")
	require.ErrorContains(t, err, "no Path or PathFunc")
}
