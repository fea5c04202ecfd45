package sql

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
		if e := json.Unmarshal(request, &got); e != nil {
			t.Fatalf("request is not JSON: %v", e)
		}
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
			if err := tt.run(); err != nil {
				t.Fatal(err)
			}
			if got.Write != tt.wantWrite {
				t.Errorf("write = %v, want %v", got.Write, tt.wantWrite)
			}
			args, _ := json.Marshal(got.Statements[0].Args)
			if string(args) != tt.wantArgs {
				t.Errorf("args = %s, want %s", args, tt.wantArgs)
			}
		})
	}
}

func TestBatchResults(t *testing.T) {
	fakeHost(t, `{"results":[{"rows_affected":2,"last_insert_id":9},{"columns":["a","b"],"rows":[[1,"x"],[2,null]]}]}`, nil)
	var b Batch
	b.Exec("INSERT ...")
	b.Query("SELECT a, b FROM t")
	res, err := b.Run()
	if err != nil {
		t.Fatal(err)
	}
	if res[0].RowsAffected != 2 || res[0].LastInsertID != 9 {
		t.Errorf("exec result = %+v", res[0].Result)
	}
	rows := res[1].Rows
	if rows.Len() != 2 || rows.Columns[1] != "b" {
		t.Fatalf("rows = %+v", rows)
	}
	var a int64
	var s string
	if err := rows.Row(1).Scan(&a, &s); err != nil || a != 2 || s != "" || !rows.Row(1).IsNull(1) {
		t.Errorf("row 1 = %d %q %v", a, s, err)
	}
}

func TestErrors(t *testing.T) {
	t.Run("host error keeps its code", func(t *testing.T) {
		fakeHost(t, "", abi.Errorf(abi.CodePermissionDenied, "ATTACH is not allowed"))
		_, err := Exec("ATTACH 'x' AS y")
		var ae *abi.Error
		if !errors.Is(err, abi.ErrPermissionDenied) || !errors.As(err, &ae) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unsupported argument", func(t *testing.T) {
		fakeHost(t, `{"results":[{}]}`, nil)
		_, err := Exec("SELECT ?", struct{}{})
		if !errors.Is(err, abi.ErrInvalidArgument) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("result count mismatch", func(t *testing.T) {
		fakeHost(t, `{"results":[]}`, nil)
		_, err := Query("SELECT 1")
		if !errors.Is(err, abi.ErrInternal) {
			t.Fatalf("err = %v", err)
		}
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
	if err := row.Scan(&i, &f, &inf, &msg, &b, &ok); err != nil {
		t.Fatal(err)
	}
	if i != 42 || f != 1.5 || !math.IsInf(inf, 1) || string(msg) != `{"role":"user"}` || string(b) != "\x01\x02" || !ok {
		t.Errorf("scanned %d %v %v %s %v %v", i, f, inf, msg, b, ok)
	}
	var s string
	if err := (Row{values: []json.RawMessage{json.RawMessage(`1.5`)}}).Scan(&i); !errors.Is(err, abi.ErrInvalidArgument) {
		t.Errorf("scan 1.5 into int: %v", err)
	}
	if err := (Row{values: []json.RawMessage{json.RawMessage(`1`)}}).Scan(&s, &s); !errors.Is(err, abi.ErrInvalidArgument) {
		t.Errorf("scan with too many destinations: %v", err)
	}
}

func TestQueryJSON(t *testing.T) {
	got := fakeHost(t, `{"results":[{"columns":["seq","body"],"rows":[[1,{"role":"user"}],[2,null]]}]}`, nil)
	rows, err := QueryJSON([]string{"body"}, "SELECT seq, body FROM m")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Statements[0].JSONColumns) != "[body]" || got.Write {
		t.Errorf("request = %+v", got)
	}
	var seq int
	var body json.RawMessage
	if err := rows.Row(0).Scan(&seq, &body); err != nil || seq != 1 || string(body) != `{"role":"user"}` {
		t.Errorf("row 0 = %d %s %v", seq, body, err)
	}
	if err := rows.Row(1).Scan(&seq, &body); err != nil || body != nil {
		t.Errorf("row 1 = %d %s %v", seq, body, err)
	}
}

func TestDecodeResponse(t *testing.T) {
	tests := []struct{ name, in string }{
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
			got, err := decodeResponse([]byte(tt.in))
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
