package sqlcap

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// TestKeptStatementJudgedAgain checks that a plugin's statement the
// connection keeps prepared is judged by the authorizer again when the
// schema under it changes: the table it read becomes a view of the host's
// sessions, made by another connection, and the same text is refused.
func TestKeptStatementJudgedAgain(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{})
	p := dbPath(t, "kept.db")
	oneCall(t, s, p, "CREATE TABLE t(x)", "INSERT INTO t VALUES ('mine')")

	host, err := sql.Open("sqlite", "file:"+p)
	require.NoError(t, err)
	defer host.Close()
	for _, q := range []string{txn.SQLiteCreate(txn.SessionsTable), `INSERT INTO ` + txn.SessionsTable + ` VALUES ('s', 1, 0, 'secret')`} {
		_, err := host.Exec(q)
		require.NoError(t, err, q)
	}

	tests := []struct {
		name    string
		replace bool // the table is replaced by a view of the host's rows first
		want    error
	}{
		{"prepared", false, nil},
		{"kept", false, nil},
		{"schema changed under it", true, abi.ErrPermissionDenied},
		{"still refused", false, abi.ErrPermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.replace {
				for _, q := range []string{`DROP TABLE t`, `CREATE VIEW t AS SELECT data AS x FROM ` + txn.SessionsTable} {
					_, err := host.Exec(q)
					require.NoError(t, err, q)
				}
			}
			c := begin(t, s, p)
			resp, err := c.do(ctx, req("SELECT x FROM t"))
			c.end(ctx, true)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, `[["mine"]]`, string(mustJSON(t, resp.Results[0].Rows)))
		})
	}
}
