package sql

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// fakeHost records the last request and answers with resp or err.
func fakeHost(t *testing.T, resp string, err error) *abi.SQLRequest {
	t.Helper()
	var got abi.SQLRequest
	old := call
	t.Cleanup(func() { call = old })
	call = func(request []byte) ([]byte, error) {
		require.NoError(t, json.Unmarshal(request, &got), "request is not JSON")
		return []byte(resp), err
	}
	return &got
}

func TestRequests(t *testing.T) {
	tests := []struct {
		name      string
		run       func() error
		wantWrite bool
		wantArgs  string
	}{
		{"exec takes the write lock", func() error {
			_, err := Exec("INSERT INTO t VALUES (?, ?, ?)", 1, "a", []byte{1, 2})
			return err
		}, true, `[1,"a",{"blob":"AQI="}]`},
		{"query does not", func() error {
			_, err := Query("SELECT x FROM t WHERE k = ?", nil)
			return err
		}, false, `[null]`},
		{"raw json is text", func() error {
			_, err := Query("SELECT ?", json.RawMessage(`{"a":1}`))
			return err
		}, false, `["{\"a\":1}"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fakeHost(t, `{"results":[{}]}`, nil)
			require.NoError(t, tt.run())
			assert.Equal(t, tt.wantWrite, got.Write, "write")
			require.Len(t, got.Statements, 1)
			args, err := json.Marshal(got.Statements[0].Args)
			require.NoError(t, err)
			assert.Equal(t, tt.wantArgs, string(args), "args")
		})
	}
}

func TestBatchResults(t *testing.T) {
	fakeHost(t, `{"results":[{"rows_affected":2,"last_insert_id":9},{"columns":["a","b"],"rows":[[1,"x"],[2,null]]}]}`, nil)
	var b Batch
	b.Exec("INSERT ...")
	b.Query("SELECT a, b FROM t")
	res, err := b.Run()
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, Result{RowsAffected: 2, LastInsertID: 9}, res[0].Result, "exec result")
	rows := res[1].Rows
	require.Equal(t, 2, rows.Len())
	require.Equal(t, []string{"a", "b"}, rows.Columns)
	var a int64
	s := []byte("not scanned")
	require.NoError(t, rows.Row(1).Scan(&a, &s), "row 1")
	assert.Equal(t, int64(2), a)
	assert.Nil(t, s, "NULL scanned into a []byte")
	assert.True(t, rows.Row(1).IsNull(1))
}

func TestErrors(t *testing.T) {
	t.Run("host error keeps its code", func(t *testing.T) {
		fakeHost(t, "", abi.Errorf(abi.CodePermissionDenied, "ATTACH is not allowed"))
		_, err := Exec("ATTACH 'x' AS y")
		require.ErrorIs(t, err, abi.ErrPermissionDenied)
		var ae *abi.Error
		require.ErrorAs(t, err, &ae)
	})
	t.Run("unsupported argument", func(t *testing.T) {
		fakeHost(t, `{"results":[{}]}`, nil)
		_, err := Exec("SELECT ?", struct{}{})
		require.ErrorIs(t, err, abi.ErrInvalidArgument)
		assert.EqualError(t, err, "sql: statement 0 argument 1: invalid_argument: unsupported type struct {}")
	})
	t.Run("argument out of range", func(t *testing.T) {
		fakeHost(t, `{"results":[{}]}`, nil)
		_, err := Exec("SELECT ?, ?", 1, uint64(1)<<63)
		require.ErrorIs(t, err, abi.ErrInvalidArgument)
		assert.EqualError(t, err, "sql: statement 0 argument 2: invalid_argument: unsigned value 9223372036854775808 overflows INTEGER")
	})
	t.Run("argument not a JSON number", func(t *testing.T) {
		fakeHost(t, `{"results":[{}]}`, nil)
		_, err := Exec("SELECT ?", math.Inf(-1))
		require.ErrorIs(t, err, abi.ErrInvalidArgument)
		assert.EqualError(t, err, "sql: encode request: invalid_argument: unsupported value -Inf")
	})
	t.Run("result count mismatch", func(t *testing.T) {
		fakeHost(t, `{"results":[]}`, nil)
		_, err := Query("SELECT 1")
		require.ErrorIs(t, err, abi.ErrInternal)
	})
}

func TestScan(t *testing.T) {
	row := Row{values: []json.RawMessage{
		json.RawMessage(`42`), json.RawMessage(`1.5`), json.RawMessage(`"+Inf"`),
		json.RawMessage(`"{\"role\":\"user\"}"`), json.RawMessage(`{"blob":"AQI="}`), json.RawMessage(`1`),
	}}
	var (
		i   int
		f   float64
		inf float64
		msg json.RawMessage
		b   []byte
		ok  bool
	)
	require.NoError(t, row.Scan(&i, &f, &inf, &msg, &b, &ok))
	assert.Equal(t, 42, i)
	assert.Equal(t, 1.5, f)
	assert.True(t, math.IsInf(inf, 1), "+Inf scanned as %v", inf)
	assert.Equal(t, `{"role":"user"}`, string(msg))
	assert.Equal(t, []byte{1, 2}, b)
	assert.True(t, ok)
	var s string
	err := (Row{values: []json.RawMessage{json.RawMessage(`1.5`)}}).Scan(&i)
	assert.ErrorIs(t, err, abi.ErrInvalidArgument, "scan 1.5 into int")
	err = (Row{values: []json.RawMessage{json.RawMessage(`1`)}}).Scan(&s, &s)
	assert.ErrorIs(t, err, abi.ErrInvalidArgument, "scan with too many destinations")
}

// TestScanBlob checks BLOB cells, {"blob": "<base64>"}, scan into every
// destination that takes one, and that a malformed one is refused naming
// the column and the cause.
func TestScanBlob(t *testing.T) {
	tests := []struct {
		name, value string
		want        []byte
		wantErr     string // the message that crosses to the host
	}{
		{name: "bytes", value: `{"blob":"AQI="}`, want: []byte{1, 2}},
		{name: "empty", value: `{"blob":""}`, want: []byte{}},
		{name: "other members ignored", value: `{"size":2,"blob":"AQI=","x":[1]}`, want: []byte{1, 2}},
		{name: "escaped base64", value: `{"blob":"AQ\u0049="}`, want: []byte{1, 2}},
		{name: "not base64", value: `{"blob":"@@"}`, wantErr: `scan column 0 ("b"): sql blob: illegal base64 data at input byte 0`},
		{name: "not a string", value: `{"blob":1}`, wantErr: `scan column 0 ("b"): sql blob: malformed JSON at offset 8: want a string`},
		{name: "truncated", value: `{"blob":"AQI="`, wantErr: `scan column 0 ("b"): sql blob: malformed JSON at offset 14: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := (&Rows{Columns: []string{"b"}, rows: [][]json.RawMessage{{json.RawMessage(tt.value)}}}).Row(0)
			var (
				b []byte
				s string
				v any
			)
			for _, dest := range []any{&b, &s, &v} {
				err := row.Scan(dest)
				if tt.wantErr != "" {
					require.ErrorIs(t, err, abi.ErrInvalidArgument, "scan into %T", dest)
					assert.Contains(t, abi.AsError(err).Message, tt.wantErr, "scan into %T", dest)
					continue
				}
				require.NoError(t, err, "scan into %T", dest)
			}
			if tt.wantErr == "" {
				assert.Equal(t, tt.want, b)
				assert.Equal(t, string(tt.want), s)
				assert.Equal(t, tt.want, v)
			}
		})
	}
}

// TestScanUnsupported checks a destination Scan cannot fill is named as
// %T names it.
func TestScanUnsupported(t *testing.T) {
	row := (&Rows{Columns: []string{"a"}, rows: [][]json.RawMessage{{json.RawMessage(`1`)}}}).Row(0)
	for _, dest := range []any{new(int32), nil, struct{}{}} {
		err := row.Scan(dest)
		require.ErrorIs(t, err, abi.ErrInvalidArgument, "scan into %T", dest)
		assert.EqualError(t, err, fmt.Sprintf(`sql: invalid_argument: scan column 0 ("a"): unsupported destination %T`, dest))
	}
}

// TestScanIntegers checks integer destinations take exactly the values
// they can hold: never wrapped around, never truncated.
func TestScanIntegers(t *testing.T) {
	tests := []struct {
		value   string
		want    int64
		wantErr string // in the error, after the column's name
	}{
		{value: `42`, want: 42},
		{value: `-7`, want: -7},
		{value: `9223372036854775807`, want: math.MaxInt64},
		{value: `-9223372036854775808`, want: math.MinInt64},
		{value: `1e2`, want: 100},
		{value: `2.50e1`, want: 25},
		{value: `3.0`, want: 3},
		{value: `-0.0`, want: 0},
		{value: `0e999999999999`, want: 0},
		{value: `9.007199254740993e15`, want: 9007199254740993}, // a float64 would round it
		{value: `9223372036854775808`, wantErr: `9223372036854775808 overflows int64`},
		{value: `-9223372036854775809`, wantErr: `-9223372036854775809 overflows int64`},
		{value: `1e19`, wantErr: `1e19 overflows int64`},
		{value: `-1e19`, wantErr: `-1e19 overflows int64`},
		{value: `1e+21`, wantErr: `1e+21 overflows int64`},
		{value: `1e999999999999`, wantErr: `1e999999999999 overflows int64`},
		{value: `12345678901234567890123`, wantErr: `12345678901234567890123 overflows int64`},
		{value: `1.5`, wantErr: `1.5 is not an integer: it has a fraction`},
		{value: `1e-2`, wantErr: `1e-2 is not an integer: it has a fraction`},
		{value: `"5"`, wantErr: `"5" is not an integer`},
		{value: `{"blob":"AQI="}`, wantErr: `{"blob":"AQI="} is not an integer`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			row := (&Rows{Columns: []string{"n"}, rows: [][]json.RawMessage{{json.RawMessage(tt.value)}}}).Row(0)
			var n64 int64
			var n int
			var b bool
			for _, dest := range []any{&n64, &n, &b} {
				err := row.Scan(dest)
				if tt.wantErr != "" {
					require.ErrorIs(t, err, abi.ErrInvalidArgument, "scan into %T", dest)
					want := tt.wantErr
					if _, isInt := dest.(*int); isInt {
						want = strings.Replace(want, "int64", "int", 1)
					}
					assert.EqualError(t, err, `sql: invalid_argument: scan column 0 ("n"): `+want, "scan into %T", dest)
					// What crosses to the host names the column and the value too.
					assert.Equal(t, `scan column 0 ("n"): `+want, abi.AsError(err).Message)
					continue
				}
				require.NoError(t, err, "scan into %T", dest)
			}
			if tt.wantErr == "" {
				assert.Equal(t, tt.want, n64)
				assert.Equal(t, int(tt.want), n)
				assert.Equal(t, tt.want != 0, b)
			}
		})
	}
}

// TestScanNull checks NULL is refused where database/sql refuses it, and
// is nil where it is nil there.
func TestScanNull(t *testing.T) {
	row := (&Rows{Columns: []string{"a"}, rows: [][]json.RawMessage{{json.RawMessage(`null`)}}}).Row(0)
	var (
		n64 int64
		n   int
		f   float64
		b   bool
		s   string
	)
	for _, dest := range []any{&n64, &n, &f, &b, &s} {
		err := row.Scan(dest)
		require.ErrorIs(t, err, abi.ErrInvalidArgument, "scan NULL into %T", dest)
		assert.Contains(t, abi.AsError(err).Message, fmt.Sprintf(`scan column 0 ("a"): NULL into %T`, dest))
	}
	blob := []byte("x")
	raw := json.RawMessage("x")
	v := any("x")
	for _, dest := range []any{&blob, &raw, &v} {
		require.NoError(t, row.Scan(dest), "scan NULL into %T", dest)
	}
	assert.Nil(t, blob)
	assert.Nil(t, raw)
	assert.Nil(t, v)
	assert.True(t, row.IsNull(0))
}

func TestQueryJSON(t *testing.T) {
	got := fakeHost(t, `{"results":[{"columns":["seq","body"],"rows":[[1,{"role":"user"}],[2,null]]}]}`, nil)
	rows, err := QueryJSON([]string{"body"}, "SELECT seq, body FROM m")
	require.NoError(t, err)
	require.Len(t, got.Statements, 1)
	assert.Equal(t, []string{"body"}, got.Statements[0].JSONColumns)
	assert.False(t, got.Write)
	var seq int
	var body json.RawMessage
	require.NoError(t, rows.Row(0).Scan(&seq, &body), "row 0")
	assert.Equal(t, 1, seq)
	assert.Equal(t, `{"role":"user"}`, string(body))
	require.NoError(t, rows.Row(1).Scan(&seq, &body), "row 1")
	assert.Nil(t, body, "row 1's NULL body")
}

func TestDecodeResponse(t *testing.T) {
	tests := []struct{ name, in string }{
		{"dialect", `{"dialect":"postgres","results":[{"rows_affected":1}]}`},
		{"typical", `{"results":[{"rows_affected":2,"last_insert_id":9},{"columns":["a","b"],"rows":[[1,"x\"]"],[{"blob":"AQI="},{"k":[1,{"n":"}"}]}],[null,-1.5e3]]}]}`},
		{"white space and unknown fields", " {\n\"x\": [1, {\"y\": \"]\"}], \"results\" : [ { \"columns\" : [ \"a\" ] , \"rows\" : [ [ true ] ] } ] } "},
		{"empty", `{"results":[]}`},
		{"empty result", `{"results":[{}]}`},
		{"escaped column name", `{"results":[{"columns":["a\"b"],"rows":[]}]}`},
		{"null results", `{"results":null}`},
		{"null row", `{"results":[{"columns":["a"],"rows":[null,[1]]}]}`},
		{"repeated member", `{"results":[{"columns":["a"],"columns":["b"],"rows":[[1]],"rows":[[2]]}]}`},
		{"trailing garbage", `{"results":[]} x`},
		{"malformed value", `{"results":[{"columns":["a"],"rows":[[1x]]}]}`},
		{"unterminated", `{"results":[{"columns":["a"],"rows":[["x]]}]}`},
		{"fractional count", `{"results":[{"rows_affected":1.5}]}`},
		{"column name not a string", `{"results":[{"columns":[1]}]}`},
		{"not an object", `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want abi.SQLResponse
			wantErr := json.Unmarshal([]byte(tt.in), &want)
			got, err := decodeResponse([]byte(tt.in), false, 0)
			if wantErr != nil {
				assert.ErrorIs(t, err, guestjson.ErrSyntax, "encoding/json: %v", wantErr)
				return
			}
			require.NoError(t, err)
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			assert.Equal(t, string(wantJSON), string(gotJSON))
		})
	}
}

func TestRebind(t *testing.T) {
	tests := []struct{ in, want string }{
		{"SELECT a FROM t WHERE k = ?1 AND n > ?2 LIMIT ?3", "SELECT a FROM t WHERE k = $1 AND n > $2 LIMIT $3"},
		{"INSERT INTO t VALUES (?, ?, ?)", "INSERT INTO t VALUES ($1, $2, $3)"},
		{"SELECT '?1', \"a?\" FROM t WHERE x = ?1 -- why?\nAND y = ?2", "SELECT '?1', \"a?\" FROM t WHERE x = $1 -- why?\nAND y = $2"},
		{"SELECT 'it''s ?' WHERE x = ?10", "SELECT 'it''s ?' WHERE x = $10"},
		{"SELECT 'unterminated ?", "SELECT 'unterminated ?"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Rebind(abi.DialectPostgres, tt.in), "%q", tt.in)
		assert.Equal(t, tt.in, Rebind(abi.DialectSQLite, tt.in), "sqlite leaves %q", tt.in)
	}
}

// TestRebindKeepsFewQueries: Rebind remembers a plugin's constant SQL, and
// the memory stays bounded for a plugin that builds a new query each call,
// with each answer still right.
func TestRebindKeepsFewQueries(t *testing.T) {
	const q = "SELECT a FROM t WHERE k = ? AND n > ?"
	want := "SELECT a FROM t WHERE k = $1 AND n > $2"
	assert.Equal(t, want, Rebind(abi.DialectPostgres, q))
	assert.Equal(t, want, Rebind(abi.DialectPostgres, q), "remembered")
	for i := range 4 * maxRebound {
		in := fmt.Sprintf("SELECT %d WHERE x = ?", i)
		assert.Equal(t, fmt.Sprintf("SELECT %d WHERE x = $1", i), Rebind(abi.DialectPostgres, in))
	}
	long := strings.Repeat(" ", maxReboundBytes-1) + "?"
	assert.Equal(t, strings.Repeat(" ", maxReboundBytes-1)+"$1", Rebind(abi.DialectPostgres, long), "its rewrite is over maxReboundBytes")
	rebound.Lock()
	defer rebound.Unlock()
	assert.Contains(t, rebound.m, q)
	assert.Len(t, rebound.m, maxRebound, "Rebind keeps at most maxRebound queries")
	assert.NotContains(t, rebound.m, long, "a query whose rewrite is over maxReboundBytes is not kept")
}

func TestDialect(t *testing.T) {
	dialect = ""
	t.Cleanup(func() { dialect = "" })
	req := fakeHost(t, `{"results":[{"columns":["1"],"rows":[[1]]}],"dialect":"postgres"}`, nil)
	d, err := Dialect()
	require.NoError(t, err)
	assert.Equal(t, abi.DialectPostgres, d)
	require.Len(t, req.Statements, 1, "Dialect asked the host")
	// Known now: no second request.
	req.Statements = nil
	d, err = Dialect()
	require.NoError(t, err)
	assert.Equal(t, abi.DialectPostgres, d)
	assert.Empty(t, req.Statements, "asked again")
	// A host before ABI 1.2 names no dialect: SQLite.
	fakeHost(t, `{"results":[{"rows_affected":1}]}`, nil)
	_, err = Exec("DELETE FROM t")
	require.NoError(t, err)
	d, _ = Dialect()
	assert.Equal(t, abi.DialectSQLite, d)
}

// TestRunAllocations bounds what a batch allocates in the guest, where each
// allocation costs thousands of instructions: a store's two statements and
// a provide's one value, as plugins/sqlite sends them, with the host's
// answer canned (and the test's own arguments): the results of a request
// are allocated once for all its statements, a value's columns and row are
// one allocation, and its JSON flags are shared (13 and 11 before).
func TestRunAllocations(t *testing.T) {
	msg := json.RawMessage(`{"role":"user","contents":[]}`)
	key := any("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name string
		resp string
		max  float64
		run  func() error
	}{
		{"two statements", `{"results":[{"rows_affected":1},{"rows_affected":1}],"dialect":"sqlite"}`, 12, func() error {
			var b Batch
			b.Exec("INSERT INTO s VALUES (?1, ?2)", key, 1)
			b.Exec("INSERT INTO m VALUES (?1, ?2, ?3)", key, "user", msg)
			_, err := b.Run()
			return err
		}},
		{"a value", `{"results":[{"columns":["v"],"rows":[[[1,2]]]}],"dialect":"sqlite"}`, 8, func() error {
			var b Batch
			b.QueryJSONValue("SELECT json_group_array(x) FROM t WHERE k = ?1 LIMIT ?2", key, 20)
			res, err := b.Run()
			if err == nil {
				var v json.RawMessage
				err = res[0].Rows.Row(0).Scan(&v)
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := call
			t.Cleanup(func() { call = old })
			resp := []byte(tt.resp)
			call = func([]byte) ([]byte, error) { return resp, nil }
			require.NoError(t, tt.run())
			assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { _ = tt.run() }), tt.max)
		})
	}
}
