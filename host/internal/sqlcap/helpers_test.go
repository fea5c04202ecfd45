package sqlcap

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
)

func newStore(t testing.TB, l Limits) *Store {
	return newStoreOpts(t, Options{Limits: l})
}

func newStoreOpts(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := NewStore(o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// testCall is one export call of a plugin granted sql on path.
type testCall struct {
	t    testing.TB
	call *capability.Call
}

func begin(t testing.TB, s *Store, path string) *testCall {
	return &testCall{t: t, call: capability.NewCall(context.Background(), "test", []capability.Grant{NewGrant(FixedPath(path), Limits{})}, backendsOf(s))}
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
	require.NoError(c.t, err)
	out, err := Func.Call(ctx, c.call, b)
	if err != nil {
		return nil, err
	}
	var resp abi.SQLResponse
	require.NoError(c.t, json.Unmarshal(out, &resp), "result is not JSON: %s", out)
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
	require.NoError(c.t, err, "%v", sql)
	return resp
}

func (c *testCall) end(ctx context.Context, ok bool) {
	c.t.Helper()
	require.NoError(c.t, c.call.End(ctx, ok), "end")
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
	require.NoError(t, err)
	defer db.Close()
	var res string
	require.NoError(t, db.QueryRow("PRAGMA integrity_check").Scan(&res))
	require.Equal(t, "ok", res, "integrity_check of %s", path)
}

func fmtInt(n int) string { return strconv.Itoa(n) }
