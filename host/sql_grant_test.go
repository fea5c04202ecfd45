package host_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// hostilePlugin loads testdata/sqlhostile granted sql on db.
func hostilePlugin(t *testing.T, h *host.Host, db string, grant host.SQLGrant, limits host.Limits) *host.Plugin {
	t.Helper()
	wasm := sdktest.BuildPlugin(t, "./testdata/sqlhostile")
	grant.Path = db
	p, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{grant}, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runSQL has the hostile plugin run statements in one provide call and
// returns the rows of each statement that returned some, as JSON text.
func runSQL(ctx context.Context, t *testing.T, p *host.Plugin, swallow bool, stmts ...string) ([]string, error) {
	t.Helper()
	cmd, err := json.Marshal(map[string]any{"sql": stmts, "swallow": swallow})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := json.Marshal(abi.NewMessage(abi.RoleUser, string(cmd)))
	if err != nil {
		t.Fatal(err)
	}
	history, _, err := p.ProvideState(ctx, abi.SessionFacts{SessionID: "s", StateKey: "k"}, json.RawMessage(`{}`), []json.RawMessage{msg})
	var out []string
	for _, raw := range history {
		var m abi.Message
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m.TextContent())
	}
	return out, err
}

// checkDatabase opens path outside the host and checks it is intact and
// holds want in table secret.
func checkDatabase(t *testing.T, path, want string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check of %s: %q, %v", path, ok, err)
	}
	var got string
	if err := db.QueryRow("SELECT group_concat(x, ',') FROM (SELECT x FROM secret ORDER BY x)").Scan(&got); err != nil || got != want {
		t.Fatalf("secret of %s = %q, %v; want %q", path, got, err, want)
	}
}

// TestSQLHostile runs a plugin that tries to escape or exhaust the sql
// capability. Every attempt is refused with a typed error, and both its own
// database and another plugin's stay intact.
func TestSQLHostile(t *testing.T) {
	h, err := host.New(t.Context(), host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	dir := t.TempDir()
	mine, theirs := filepath.Join(dir, "mine.db"), filepath.Join(dir, "theirs.db")
	// Another plugin's database, with data the hostile one wants.
	other := hostilePlugin(t, h, theirs, host.SQLGrant{}, host.Limits{})
	if _, err := runSQL(t.Context(), t, other, false, "CREATE TABLE secret(x)", "INSERT INTO secret VALUES ('their secret')"); err != nil {
		t.Fatal(err)
	}
	p := hostilePlugin(t, h, mine, host.SQLGrant{Limits: host.SQLLimits{Timeout: 300 * time.Millisecond, MaxRows: 1000}}, host.Limits{})
	if _, err := runSQL(t.Context(), t, p, false, "CREATE TABLE secret(x)", "INSERT INTO secret VALUES ('mine')"); err != nil {
		t.Fatal(err)
	}
	// Only the call's own deadline stops this one.
	slow := hostilePlugin(t, h, mine, host.SQLGrant{Limits: host.SQLLimits{Timeout: time.Hour}}, host.Limits{CallTimeout: 300 * time.Millisecond})

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
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("refusal took %s", d)
			}
			checkDatabase(t, mine, "mine")
			checkDatabase(t, theirs, "their secret")
		})
	}
	t.Run("the other database is not visible", func(t *testing.T) {
		got, err := runSQL(t.Context(), t, p, false, "SELECT x FROM secret", "SELECT name FROM sqlite_schema")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(got, " "), "their") {
			t.Fatalf("saw %q", got)
		}
	})
}

type tenantKey struct{}

// TestSQLGrantPerTenant: a PathFunc chooses the database per call from the
// caller's context, so one loaded plugin keeps tenants in separate files.
func TestSQLGrantPerTenant(t *testing.T) {
	h, err := host.New(t.Context(), host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	dir := t.TempDir()
	grant := host.SQLGrant{PathFunc: func(ctx context.Context) (string, error) {
		tenant, ok := ctx.Value(tenantKey{}).(string)
		if !ok {
			return "", errors.New("no tenant in context")
		}
		return filepath.Join(dir, tenant+".db"), nil
	}}
	wasm := sdktest.BuildPlugin(t, "./testdata/sqlhostile")
	p, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{grant}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		ctx := context.WithValue(t.Context(), tenantKey{}, tenant)
		if _, err := runSQL(ctx, t, p, false, "CREATE TABLE secret(x)", "INSERT INTO secret VALUES ('"+tenant+"')"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tenant := range []string{"acme", "globex"} {
		checkDatabase(t, filepath.Join(dir, tenant+".db"), tenant)
	}
	if _, err := runSQL(t.Context(), t, p, false, "SELECT 1"); err == nil {
		t.Fatal("a call without a tenant reached a database")
	}
}
