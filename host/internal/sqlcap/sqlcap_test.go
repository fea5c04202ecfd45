package sqlcap

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
)

func TestValuesRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{})
	p := dbPath(t, "v.db")
	oneCall(t, s, p, "CREATE TABLE v(id INTEGER PRIMARY KEY, x)")
	tests := []struct {
		name string
		arg  any
		want string // the value as the result row carries it
	}{
		{"null", nil, `null`},
		{"true", true, `1`},
		{"false", false, `0`},
		{"int", 42, `42`},
		{"negative", -7, `-7`},
		{"max int64", int64(math.MaxInt64), `9223372036854775807`},
		{"float", 1.5, `1.5`},
		{"text", "héllo \"world\"\n", `"héllo \"world\"\n"`},
		{"empty text", "", `""`},
		{"blob", abi.SQLBlob{0, 1, 2, 255}, `{"blob":"AAEC/w=="}`},
		{"empty blob", abi.SQLBlob{}, `{"blob":""}`},
		{"json text", `{"a":[1,2]}`, `"{\"a\":[1,2]}"`},
	}
	t.Run("infinity", func(t *testing.T) {
		got := oneCall(t, s, p, "SELECT 9e999, -9e999").Results[0].Rows[0]
		assert.Equal(t, `"+Inf"`, string(got[0]), "positive infinity")
		assert.Equal(t, `"-Inf"`, string(got[1]), "negative infinity")
	})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := begin(t, s, p)
			resp, err := c.do(ctx, abi.SQLRequest{Write: true, Statements: []abi.SQLStatement{
				{SQL: "INSERT INTO v(id, x) VALUES (?, ?)", Args: []any{i + 1, tt.arg}},
				{SQL: "SELECT x FROM v WHERE id = ?", Args: []any{i + 1}},
			}})
			require.NoError(t, err)
			c.end(ctx, true)
			ins, sel := resp.Results[0], resp.Results[1]
			assert.Equal(t, int64(1), ins.RowsAffected, "insert: rows_affected")
			assert.Equal(t, int64(i+1), ins.LastInsertID, "insert: last_insert_id")
			require.Equal(t, []string{"x"}, sel.Columns, "select: columns")
			require.Len(t, sel.Rows, 1, "select: rows")
			assert.Equal(t, tt.want, string(sel.Rows[0][0]), "value")
		})
	}
}

func TestTransactionPerExportCall(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{})
	p := dbPath(t, "tx.db")
	oneCall(t, s, p, "CREATE TABLE t(x INTEGER)")
	tests := []struct {
		name  string
		ok    bool
		write bool
		want  int
	}{
		{"failed call rolls back", false, true, 0},
		{"failed deferred call rolls back", false, false, 0},
		{"successful call commits", true, true, 2},
		{"successful deferred call commits", true, false, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := begin(t, s, p)
			// Two requests: both belong to the call's one transaction.
			for range 2 {
				_, err := c.do(ctx, abi.SQLRequest{Write: tt.write, Statements: []abi.SQLStatement{{SQL: "INSERT INTO t VALUES (1)"}}})
				require.NoError(t, err)
			}
			c.end(ctx, tt.ok)
			got := oneCall(t, s, p, "SELECT count(*) FROM t").Results[0].Rows[0][0]
			assert.Equal(t, fmt.Sprint(tt.want), string(got), "rows after call")
		})
	}
}

func TestNotGranted(t *testing.T) {
	call := capability.NewCall(context.Background(), "nogrant", nil, nil)
	_, err := Func.Call(context.Background(), call, []byte(`{"statements":[{"sql":"SELECT 1"}]}`))
	require.ErrorIs(t, err, abi.ErrPermissionDenied)
}

func TestAuthorizer(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{})
	p := dbPath(t, "auth.db")
	other := dbPath(t, "other.db")
	oneCall(t, s, other, "CREATE TABLE secret(x)", "INSERT INTO secret VALUES ('other plugin data')")
	oneCall(t, s, p, "CREATE TABLE t(x)", "INSERT INTO t VALUES (1)", "CREATE VIEW lv AS SELECT load_extension('x')")
	denied := []struct {
		name, sql string
	}{
		{"attach", "ATTACH DATABASE '" + other + "' AS o"},
		{"attach uri", "ATTACH 'file:" + other + "?mode=ro' AS o"},
		{"detach", "DETACH DATABASE main"},
		{"load_extension", "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libc.so.6')"},
		{"begin", "BEGIN"},
		{"commit", "COMMIT"},
		{"rollback", "ROLLBACK"},
		{"savepoint", "SAVEPOINT s"},
		{"temp table", "CREATE TEMP TABLE tt(x)"},
		{"temp schema", "SELECT * FROM temp.sqlite_master"},
		{"writable_schema", "PRAGMA writable_schema=ON"},
		{"journal_mode change", "PRAGMA journal_mode=DELETE"},
		{"synchronous", "PRAGMA synchronous=OFF"},
		{"foreign_keys off", "PRAGMA foreign_keys=OFF"},
		{"other schema pragma", "PRAGMA temp.user_version=1"},
		{"integrity_check", "PRAGMA integrity_check"},
		{"raw pages", "SELECT * FROM sqlite_dbpage"},
		{"raw page write", "UPDATE sqlite_dbpage SET data = zeroblob(4096) WHERE pgno = 1"},
		{"dbstat", "SELECT * FROM dbstat"},
		{"dbpage vtab", "CREATE VIRTUAL TABLE d USING sqlite_dbpage"},
	}
	for _, tt := range denied {
		t.Run("deny "+tt.name, func(t *testing.T) {
			c := begin(t, s, p)
			_, err := c.do(ctx, req(tt.sql))
			c.end(ctx, true)
			require.ErrorIs(t, err, abi.ErrPermissionDenied)
		})
	}
	t.Run("deny load_extension through a view", func(t *testing.T) {
		// trusted_schema=OFF refuses it before the authorizer sees it.
		c := begin(t, s, p)
		_, err := c.do(ctx, req("SELECT * FROM lv"))
		c.end(ctx, true)
		require.ErrorContains(t, err, "load_extension", "want a refusal of load_extension")
	})
	allowed := []struct {
		name, sql string
	}{
		{"user_version set", "PRAGMA user_version = 7"},
		{"user_version read", "PRAGMA user_version"},
		{"main user_version", "PRAGMA main.user_version"},
		{"table_info", "PRAGMA table_info(t)"},
		{"table_info function", "SELECT name FROM pragma_table_info('t')"},
		{"index_list", "PRAGMA index_list(t)"},
		{"journal_mode read", "PRAGMA journal_mode"},
		{"json_each", "SELECT value FROM json_each('[1,2,3]')"},
		{"schema read", "SELECT name FROM sqlite_schema"},
		{"fts5", "CREATE VIRTUAL TABLE IF NOT EXISTS f USING fts5(body)"},
		{"recursive cte", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 10) SELECT sum(x) FROM c"},
		{"ddl", "CREATE INDEX IF NOT EXISTS tx ON t(x)"},
	}
	for _, tt := range allowed {
		t.Run("allow "+tt.name, func(t *testing.T) {
			c := begin(t, s, p)
			c.must(ctx, tt.sql)
			c.end(ctx, true)
		})
	}
	// The refusals left both databases as they were.
	assert.Len(t, oneCall(t, s, other, "SELECT x FROM secret").Results[0].Rows, 1, "other database rows")
	checkIntegrity(t, p)
	checkIntegrity(t, other)
}

func TestJSONColumns(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{})
	p := dbPath(t, "json.db")
	oneCall(t, s, p, "CREATE TABLE m(id INTEGER, body TEXT)",
		`INSERT INTO m VALUES (1, '{"role": "user",  "n": [1, 2]}'), (2, NULL), (3, '"just a string"'), (4, 'not json')`)
	tests := []struct {
		name string
		id   int
		want string
		err  error
	}{
		{"object compacted", 1, `[1,{"role":"user","n":[1,2]}]`, nil},
		{"null", 2, `[2,null]`, nil},
		{"string document", 3, `[3,"just a string"]`, nil},
		{"invalid", 4, "", abi.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := begin(t, s, p)
			resp, err := c.do(ctx, abi.SQLRequest{Statements: []abi.SQLStatement{
				{SQL: "SELECT id, body FROM m WHERE id = ?", Args: []any{tt.id}, JSONColumns: []string{"body"}}}})
			c.end(ctx, err == nil)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			row, _ := json.Marshal(resp.Results[0].Rows[0])
			assert.Equal(t, tt.want, string(row), "row")
		})
	}
}

// TestDialect: every response names its dialect (ABI 1.2), so a plugin
// served by SQLite or PostgreSQL knows which SQL it speaks.
func TestDialect(t *testing.T) {
	s := newStore(t, Limits{})
	resp := oneCall(t, s, dbPath(t, "d.db"), "SELECT 1")
	assert.Equal(t, abi.DialectSQLite, resp.Dialect)
}
