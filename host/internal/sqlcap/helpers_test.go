package sqlcap

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
)

func newStore(t testing.TB, l Limits) *Store {
	return newStoreOpts(t, Options{Limits: l})
}

func newStoreOpts(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := NewStore(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testCall is one export call of a plugin granted sql on path.
type testCall struct {
	t    testing.TB
	call *capability.Call
}

func begin(t testing.TB, s *Store, path string) *testCall {
	return &testCall{t: t, call: capability.NewCall("test", []capability.Grant{NewGrant(FixedPath(path), Limits{})}, backendsOf(s))}
}

// backendsOf serves the sql capability from s, as a Host's backends do.
func backendsOf(s *Store) *capability.Backends {
	return capability.NewBackends([]capability.Kind{{
		Func:       Func,
		NewBackend: func() (capability.Backend, error) { return s, nil },
	}})
}

func (c *testCall) do(ctx context.Context, req abi.SQLRequest) (*abi.SQLResponse, error) {
	c.t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	out, err := Func.Call(ctx, c.call, b)
	if err != nil {
		return nil, err
	}
	var resp abi.SQLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		c.t.Fatalf("result is not JSON: %v\n%s", err, out)
	}
	return &resp, nil
}

// must runs statements without args and fails the test on error.
func (c *testCall) must(ctx context.Context, sql ...string) *abi.SQLResponse {
	c.t.Helper()
	req := abi.SQLRequest{}
	for _, q := range sql {
		req.Statements = append(req.Statements, abi.SQLStatement{SQL: q})
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		c.t.Fatalf("%v: %v", sql, err)
	}
	return resp
}

func (c *testCall) end(ctx context.Context, ok bool) {
	c.t.Helper()
	if err := c.call.End(ctx, ok); err != nil {
		c.t.Fatalf("end: %v", err)
	}
}

// oneCall runs sql in one committed call.
func oneCall(t testing.TB, s *Store, path string, sql ...string) *abi.SQLResponse {
	t.Helper()
	c := begin(t, s, path)
	resp := c.must(context.Background(), sql...)
	c.end(context.Background(), true)
	return resp
}

func dbPath(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

func req(sql string, args ...any) abi.SQLRequest {
	return abi.SQLRequest{Statements: []abi.SQLStatement{{SQL: sql, Args: args}}}
}

// checkIntegrity opens path directly, outside the capability, and fails the
// test unless SQLite finds the file intact.
func checkIntegrity(t testing.TB, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatal(err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check of %s: %s", path, res)
	}
}

func fmtInt(n int) string { return strconv.Itoa(n) }
