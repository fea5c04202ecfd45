package sql

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// TestEncodeRequestMatchesEncodingJSON pins the hand-written request
// encoder to what encoding/json writes: the same document once decoded
// (numbers compared as written, so a float64 without a fraction still
// reaches the host as an INTEGER), whatever the strings hold.
func TestEncodeRequestMatchesEncodingJSON(t *testing.T) {
	msg := json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"a \"quote\", a \\ and <html> & é"}]}`)
	strs := []string{"", "plain", "quote \" backslash \\ slash /", "\n\r\t\b\f\x00\x1f\x7f", "é ü 中文 🙂", "\u2028\u2029",
		"bad \xff utf-8 \xc3", "<script>&amp;</script>", strings.Repeat("long ", 100)}
	nums := []any{0, -1, int8(-8), int16(300), int32(-70000), int64(math.MaxInt64), int64(math.MinInt64),
		uint8(255), uint16(65535), uint32(math.MaxUint32), uint(1 << 62), uint64(math.MaxInt64),
		0.0, 3.0, -2.5, 1e20, 1e21, 1.5e-7, 1e-6, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64,
		float32(0.1), float32(1e21), float32(-3), true, false, nil, []byte{0, 1, 2, 250}, abi.SQLBlob("blob"), msg}
	tests := []struct {
		name string
		req  func(b *Batch)
	}{
		{"strings", func(b *Batch) {
			for _, s := range strs {
				b.Query("SELECT ?", s)
			}
		}},
		{"arguments of every type", func(b *Batch) { b.Exec("INSERT INTO t VALUES (?)", nums...) }},
		{"sql text", func(b *Batch) {
			b.Query("SELECT 'it''s' AS \"q\"\n\tFROM t -- a comment\n")
			b.QueryJSON([]string{"body", "é"}, "SELECT body FROM t")
		}},
		{"value last", func(b *Batch) { b.QueryJSONValue("SELECT '[' || string_agg(body, ',') || ']' FROM t", "k") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Batch
			tt.req(&b)
			require.NoError(t, b.err)
			// encoding/json writes a json.RawMessage as JSON; the wire
			// carries it as TEXT, as wireArg documents.
			want := b.req
			want.Statements = make([]abi.SQLStatement, len(b.req.Statements))
			for i, st := range b.req.Statements {
				st.Args = append([]any(nil), st.Args...)
				for j, a := range st.Args {
					if m, ok := a.(json.RawMessage); ok {
						st.Args[j] = string(m)
					}
				}
				want.Statements[i] = st
			}
			wantJSON, err := json.Marshal(want)
			require.NoError(t, err)
			for range 2 { // the second time from appendSQL's literals
				got, err := encodeRequest(&b.req)
				require.NoError(t, err)
				assert.True(t, utf8.Valid(got), "the request is not UTF-8 (JSON text must be): %q", got)
				assert.Equal(t, decodeNumbers(t, wantJSON), decodeNumbers(t, got), "request\n got %s\nwant %s", got, wantJSON)
			}
		})
	}
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v), "%s", b)
	return v
}

func TestEncodeRequestRefusesNonFinite(t *testing.T) {
	for _, f := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
		var b Batch
		b.Exec("INSERT INTO t VALUES (?)", f)
		_, err := encodeRequest(&b.req)
		require.ErrorIs(t, err, abi.ErrInvalidArgument, "%v", f)
	}
}

// TestQueryJSONValue checks that the value of a QueryJSONValue statement
// placed last is taken from the response as the host wrote it, without
// being decoded, and that any other response is decoded in full.
func TestQueryJSONValue(t *testing.T) {
	// Not JSON: only a response taken apart without decoding the value
	// can return it; a decoder would fail on it.
	const unscanned = `[{"a":1}}`
	tests := []struct {
		name, resp string
		value      string
		dialect    string
	}{
		{"sliced, sqlite", `{"results":[{"rows_affected":1},{"columns":["v"],"rows":[[` + unscanned + `]]}],"dialect":"sqlite"}`, unscanned, abi.DialectSQLite},
		{"sliced, postgres", `{"results":[{"rows_affected":1},{"columns":["v"],"rows":[[` + unscanned + `]]}],"dialect":"postgres"}`, unscanned, abi.DialectPostgres},
		{"null", `{"results":[{"rows_affected":1},{"columns":["v"],"rows":[[null]]}],"dialect":"sqlite"}`, "", abi.DialectSQLite},
		{"white space: decoded", `{"results":[{"rows_affected":1},{"columns":["v"],"rows":[[ [1, 2] ]]}], "dialect":"sqlite"}`, `[1, 2]`, abi.DialectSQLite},
		{"another member: decoded", `{"results":[{"rows_affected":1},{"columns":["v"],"rows":[[[1]]]}],"dialect":"sqlite","x":1}`, `[1]`, abi.DialectSQLite},
		{"an older host: decoded", `{"results":[{"rows_affected":1},{"columns":["v"],"rows":[[{"a":"]]}]"}]]}]}`, `{"a":"]]}]"}`, abi.DialectSQLite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fakeHost(t, tt.resp, nil)
			var b Batch
			b.Exec("UPDATE t SET a = 1")
			b.QueryJSONValue("SELECT '[' || string_agg(x, ',') || ']' FROM t WHERE k = ?1", "k")
			res, err := b.Run()
			require.NoError(t, err)
			require.Len(t, got.Statements, 2)
			assert.Equal(t, "SELECT (SELECT '[' || string_agg(x, ',') || ']' FROM t WHERE k = ?1) AS v", got.Statements[1].SQL, "run as a scalar subquery")
			assert.Equal(t, []string{"v"}, got.Statements[1].JSONColumns)
			assert.Equal(t, int64(1), res[0].RowsAffected, "the results before it")
			require.Equal(t, 1, res[1].Rows.Len())
			var v json.RawMessage
			require.NoError(t, res[1].Rows.Row(0).Scan(&v))
			assert.Equal(t, tt.value, string(v), "value")
			d, err := Dialect()
			require.NoError(t, err)
			assert.Equal(t, tt.dialect, d, "dialect")
		})
	}
	t.Run("not last: decoded", func(t *testing.T) {
		fakeHost(t, `{"results":[{"columns":["v"],"rows":[[[1]]]},{"rows_affected":1}],"dialect":"sqlite"}`, nil)
		var b Batch
		b.QueryJSONValue("SELECT 1")
		b.Exec("UPDATE t SET a = 1")
		res, err := b.Run()
		require.NoError(t, err)
		assert.Equal(t, json.RawMessage(`[1]`), res[0].Rows.Row(0).Raw(0))
		assert.Equal(t, int64(1), res[1].RowsAffected)
	})
}
