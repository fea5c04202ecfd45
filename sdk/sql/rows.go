package sql

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// Rows are the rows a statement returned, all of them: the host bounds how
// many a request may return, so page with LIMIT over large tables.
type Rows struct {
	Columns []string
	rows    [][]json.RawMessage
	json    []bool // columns the host sent as JSON (QueryJSON)
}

// Len is the number of rows.
func (r *Rows) Len() int { return len(r.rows) }

// Row returns row i.
func (r *Rows) Row(i int) Row { return Row{values: r.rows[i], json: r.json} }

// Row is one result row.
type Row struct {
	values []json.RawMessage
	json   []bool
}

// Len is the number of columns.
func (r Row) Len() int { return len(r.values) }

// IsNull reports whether column col is NULL.
func (r Row) IsNull(col int) bool { return string(r.values[col]) == "null" }

// Raw returns column col as the host encoded it (see abi.SQLResult).
func (r Row) Raw(col int) json.RawMessage { return r.values[col] }

// MarshalJSON encodes the row as the host sent it, an array of values.
func (r Row) MarshalJSON() ([]byte, error) { return json.Marshal(r.values) }

// Scan copies the row's columns into dest, one pointer per column, as
// database/sql does: *int64, *int, *float64, *bool, *string, *[]byte,
// *json.RawMessage (a TEXT column holding JSON, passed through without
// decoding it into Go values), or *any. NULL gives the zero value.
func (r Row) Scan(dest ...any) error {
	if len(dest) != len(r.values) {
		return fmt.Errorf("sql: scan: %w", abi.Errorf(abi.CodeInvalidArgument, "%d destinations for %d columns", len(dest), len(r.values)))
	}
	for i, d := range dest {
		if raw, ok := d.(*json.RawMessage); ok && r.json != nil && r.json[i] {
			// Already JSON: no decoding at all.
			if r.IsNull(i) {
				*raw = nil
			} else {
				*raw = r.values[i]
			}
			continue
		}
		if err := scanOne(r.values[i], d); err != nil {
			return fmt.Errorf("sql: scan column %d: %w", i, abi.Errorf(abi.CodeInvalidArgument, "%v", err))
		}
	}
	return nil
}

func scanOne(v json.RawMessage, dest any) error {
	null := string(v) == "null"
	switch d := dest.(type) {
	case *int64:
		if null {
			*d = 0
			return nil
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			f, ferr := strconv.ParseFloat(string(v), 64)
			if ferr != nil || f != math.Trunc(f) {
				return fmt.Errorf("%s is not an integer", v)
			}
			n = int64(f)
		}
		*d = n
	case *int:
		var n int64
		if err := scanOne(v, &n); err != nil {
			return err
		}
		*d = int(n)
	case *float64:
		if null {
			*d = 0
			return nil
		}
		switch string(v) {
		case `"+Inf"`:
			*d = math.Inf(1)
			return nil
		case `"-Inf"`:
			*d = math.Inf(-1)
			return nil
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("%s is not a number", v)
		}
		*d = f
	case *bool:
		var n int64
		if err := scanOne(v, &n); err != nil {
			return err
		}
		*d = n != 0
	case *string:
		if null {
			*d = ""
			return nil
		}
		if len(v) > 0 && v[0] == '"' {
			str, err := guestjson.Unquote(v)
			*d = str
			return err
		}
		if len(v) > 0 && v[0] == '{' {
			var b abi.SQLBlob
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			*d = string(b)
			return nil
		}
		*d = string(v) // a number, as SQLite would convert it
	case *[]byte:
		if null {
			*d = nil
			return nil
		}
		var s string
		if err := scanOne(v, &s); err != nil {
			return err
		}
		*d = []byte(s)
	case *json.RawMessage:
		if null {
			*d = nil
			return nil
		}
		var s string
		if err := scanOne(v, &s); err != nil {
			return err
		}
		// Not validated here: the guest's JSON is slow, and encoding the
		// value into an export's response validates it anyway.
		*d = json.RawMessage(s)
	case *any:
		switch {
		case null:
			*d = nil
		case v[0] == '"':
			s, err := guestjson.Unquote(v)
			if err != nil {
				return err
			}
			*d = s
		case v[0] == '{':
			var b abi.SQLBlob
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			*d = []byte(b)
		default:
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				*d = n
				return nil
			}
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return err
			}
			*d = f
		}
	default:
		return fmt.Errorf("unsupported destination %T", dest)
	}
	return nil
}
