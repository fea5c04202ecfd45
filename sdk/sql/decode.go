package sql

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// decodeResponse decodes an abi.SQLResponse. encoding/json runs at about
// 1 MB/s in a preemptible WebAssembly guest, and a provide's rows are ten
// kilobytes and more, so the rows are split with the guest side's scanner
// (internal/guestjson), which checks each value and slices it out without
// decoding it. Field names are exact, as the host writes them; a member of
// another name is skipped, a repeated one replaces the earlier.
//
// With valueLast (the request's last statement came from
// Batch.QueryJSONValue, so its result is one row of one column), that
// result is not scanned when the response ends as the host writes it: its
// value is the bytes between the result's known head and the response's
// known tail. Anything else is decoded in full.
func decodeResponse(b []byte, valueLast bool, statements int) (abi.SQLResponse, error) {
	var resp abi.SQLResponse
	d := guestjson.NewDecoder(b)
	sliced := false
	err := d.Object(func(key []byte) error {
		if string(key) == "dialect" {
			resp.Dialect = ""
			if d.Peek() == 'n' {
				return d.ReadNull()
			}
			s, err := d.ReadString()
			resp.Dialect = s
			return err
		}
		if string(key) != "results" {
			return d.Skip()
		}
		resp.Results = nil
		if d.Peek() == 'n' {
			return d.ReadNull()
		}
		resp.Results = make([]abi.SQLResult, 0, statements)
		return d.Array(func() error {
			if valueLast && len(resp.Results) == statements-1 && d.Peek() == '{' {
				if r, dialect, ok := sliceValue(b[d.Offset():]); ok {
					resp.Results = append(resp.Results, r)
					resp.Dialect = dialect
					sliced = true
					return errSliced
				}
			}
			r, err := decodeResult(&d)
			resp.Results = append(resp.Results, r)
			return err
		})
	})
	if sliced && err == errSliced {
		return resp, nil
	}
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return abi.SQLResponse{}, err
	}
	return resp, nil
}

func decodeResult(d *guestjson.Decoder) (abi.SQLResult, error) {
	var r abi.SQLResult
	err := d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "columns":
			r.Columns = nil
			err = d.Array(func() error {
				name, err := d.ReadString()
				r.Columns = append(r.Columns, name)
				return err
			})
		case "rows":
			r.Rows = nil
			err = d.Array(func() error {
				if d.Peek() == 'n' {
					r.Rows = append(r.Rows, nil)
					return d.ReadNull()
				}
				row := make([]json.RawMessage, 0, len(r.Columns))
				err := d.Array(func() error {
					v, err := d.ReadValue()
					row = append(row, v)
					return err
				})
				r.Rows = append(r.Rows, row)
				return err
			})
		case "rows_affected":
			r.RowsAffected, err = d.ReadInt64()
		case "last_insert_id":
			r.LastInsertID, err = d.ReadInt64()
		default:
			err = d.Skip()
		}
		return err
	})
	return r, err
}

// errSliced stops decoding once the last result has been sliced.
var errSliced = errors.New("sql: sliced")

// valueColumn names the column of a QueryJSONValue statement.
const valueColumn = "v"

// valueHead is how the host begins the result of a QueryJSONValue
// statement; valueTails are how a response ends after its value, one per
// dialect.
const valueHead = `{"columns":["` + valueColumn + `"],"rows":[[`

var valueTails = [...]struct{ tail, dialect string }{
	{`]]}],"dialect":"` + abi.DialectSQLite + `"}`, abi.DialectSQLite},
	{`]]}],"dialect":"` + abi.DialectPostgres + `"}`, abi.DialectPostgres},
}

// sliceValue takes the value of a QueryJSONValue result out of rest, the
// response from that result on. The statement returns exactly one row of
// one column (it runs as a scalar subquery), and the host checked and
// compacted the value as a JSON column, so when rest is the known head,
// a value and the known tail, the value is everything in between: neither
// another row nor another result can follow it.
func sliceValue(rest []byte) (abi.SQLResult, string, bool) {
	if !bytes.HasPrefix(rest, []byte(valueHead)) {
		return abi.SQLResult{}, "", false
	}
	for _, t := range valueTails {
		if len(rest) > len(valueHead)+len(t.tail) && bytes.HasSuffix(rest, []byte(t.tail)) {
			// One allocation for the columns and the row, rather than three.
			r := &valueResult{columns: [1]string{valueColumn}}
			r.row[0] = rest[len(valueHead) : len(rest)-len(t.tail) : len(rest)-len(t.tail)]
			r.rows[0] = r.row[:]
			return abi.SQLResult{Columns: r.columns[:], Rows: r.rows[:]}, t.dialect, true
		}
	}
	return abi.SQLResult{}, "", false
}

// valueResult holds the columns and the one row of a sliced value.
type valueResult struct {
	columns [1]string
	row     [1]json.RawMessage
	rows    [1][]json.RawMessage
}
