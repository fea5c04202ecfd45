package sql

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
	"github.com/wasmhist/wasmhist/sdk"
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
func (r *Rows) Row(i int) Row { return Row{values: r.rows[i], json: r.json, columns: r.Columns} }

// Row is one result row.
type Row struct {
	values  []json.RawMessage
	json    []bool
	columns []string // names, for errors
}

// Len is the number of columns.
func (r Row) Len() int { return len(r.values) }

// IsNull reports whether column col is NULL.
func (r Row) IsNull(col int) bool { return string(r.values[col]) == "null" }

// Raw returns column col as the host encoded it (see abi.SQLResult).
func (r Row) Raw(col int) json.RawMessage { return r.values[col] }

// MarshalJSON encodes the row as the host sent it, an array of values.
func (r Row) MarshalJSON() ([]byte, error) { return json.Marshal(r.values) }

// Scan copies the row's columns into dest, one pointer per column, with
// the conversions of database/sql where SQLite's values need one:
//
//   - *int64, *int: an INTEGER, or a REAL with an integral value (3.0,
//     1e2). A value with a fraction, or outside the destination's range,
//     is an error; it never wraps around or truncates.
//   - *bool: as *int64, then true when not zero (SQLite has no boolean
//     type; true is stored as 1).
//   - *float64: an INTEGER or a REAL, infinities included.
//   - *string: TEXT, a BLOB's bytes, or the text of a number (as SQLite's
//     CAST AS TEXT gives it).
//   - *[]byte: as *string, in a new slice.
//   - *json.RawMessage: a column named in QueryJSON's jsonColumns as the
//     host sent it, without decoding; any other column as *[]byte (not
//     validated: writing it into an export's response validates it).
//   - *any: int64 for an integer, float64 for any other number, string for
//     TEXT, []byte for a BLOB, nil for NULL.
//
// NULL, as with database/sql, sets a *[]byte, *json.RawMessage or *any to
// nil and is an error for every other destination: scan a column that may
// be NULL into one of those three, or check IsNull first. Errors wrap
// abi.ErrInvalidArgument and name the column and its value. When Scan
// fails, the destinations before the failing column have been set.
func (r Row) Scan(dest ...any) error {
	if len(dest) != len(r.values) {
		return sdk.Wrap("sql", &abi.Error{Code: abi.CodeInvalidArgument,
			Message: "scan: " + strconv.Itoa(len(dest)) + " destinations for " + strconv.Itoa(len(r.values)) + " columns"})
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
			// The column goes into the *abi.Error's message: that message
			// is all of the error that crosses to the host.
			return sdk.Wrap("sql", &abi.Error{Code: abi.CodeInvalidArgument, Message: "scan " + r.column(i) + ": " + err.Error()})
		}
	}
	return nil
}

// column names column i for an error.
func (r Row) column(i int) string {
	if i < len(r.columns) {
		return "column " + strconv.Itoa(i) + " (" + strconv.Quote(r.columns[i]) + ")"
	}
	return "column " + strconv.Itoa(i)
}

// errNull is scanning NULL into a destination that cannot hold it.
type errNull struct{ dest any }

func (e errNull) Error() string {
	return "NULL into " + typeName(e.dest) + ": scan a column that may be NULL into *[]byte, *json.RawMessage or *any, or check Row.IsNull"
}

func scanOne(v json.RawMessage, dest any) error {
	null := string(v) == "null"
	switch d := dest.(type) {
	case *int64:
		if null {
			return errNull{dest}
		}
		n, err := integer(v, 64, "int64")
		if err != nil {
			return err
		}
		*d = n
	case *int:
		if null {
			return errNull{dest}
		}
		n, err := integer(v, strconv.IntSize, "int")
		if err != nil {
			return err
		}
		*d = int(n)
	case *float64:
		if null {
			return errNull{dest}
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
			return errors.New(quoteValue(v) + " is not a number")
		}
		*d = f
	case *bool:
		if null {
			return errNull{dest}
		}
		n, err := integer(v, 64, "int64")
		if err != nil {
			return err
		}
		*d = n != 0
	case *string:
		if null {
			return errNull{dest}
		}
		s, err := text(v)
		if err != nil {
			return err
		}
		*d = s
	case *[]byte:
		if null {
			*d = nil
			return nil
		}
		s, err := text(v)
		if err != nil {
			return err
		}
		*d = []byte(s)
	case *json.RawMessage:
		if null {
			*d = nil
			return nil
		}
		s, err := text(v)
		if err != nil {
			return err
		}
		// Not validated here: the guest's JSON is slow, and encoding the
		// value into an export's response validates it anyway.
		*d = json.RawMessage(s)
	case *any:
		switch {
		case null:
			*d = nil
		case len(v) > 0 && v[0] == '"':
			s, err := guestjson.Unquote(v)
			if err != nil {
				return err
			}
			*d = s
		case len(v) > 0 && v[0] == '{':
			b, err := blob(v)
			if err != nil {
				return err
			}
			*d = b
		default:
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				*d = n
				return nil
			}
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return errors.New(quoteValue(v) + " is not a number")
			}
			*d = f
		}
	default:
		return errors.New("unsupported destination " + typeName(dest))
	}
	return nil
}

// text is a value as *string reads it: TEXT unquoted, a BLOB's bytes, a
// number's text.
func text(v json.RawMessage) (string, error) {
	switch {
	case len(v) > 0 && v[0] == '"':
		return guestjson.Unquote(v)
	case len(v) > 0 && v[0] == '{':
		b, err := blob(v)
		return string(b), err
	}
	return string(v), nil // a number, as SQLite would convert it
}

// blob decodes a BLOB cell, {"blob": "<standard base64>"} (abi.SQLBlob),
// with the guest's scanner: abi.SQLBlob's UnmarshalJSON would link
// encoding/json's reflective codec into every plugin that scans a row. As
// with that method, other members are ignored and a null blob is empty.
func blob(v []byte) ([]byte, error) {
	var b64 string
	d := guestjson.NewDecoder(v)
	err := d.Object(func(key []byte) (err error) {
		if string(key) != "blob" {
			return d.Skip()
		}
		b64, err = d.ReadString()
		return err
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return nil, sdk.Wrap("sql blob", err)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, sdk.Wrap("sql blob", err)
	}
	return b, nil
}

// typeName is the name of v's type, as %T prints it.
func typeName(v any) string {
	if v == nil {
		return "<nil>"
	}
	return reflect.TypeOf(v).String()
}

// integer is the exact value of the JSON number v when it is an integer
// that fits in a signed integer of the given size; typ names that type in
// errors. SQLite sends REAL
// values as numbers with a fraction or an exponent (1e+21), so the number
// is taken apart as decimal digits rather than parsed as a float64, which
// would round 9007199254740993 and saturate on 1e19.
func integer(v json.RawMessage, bits int, typ string) (int64, error) {
	mant, exp, ok := decimal(v)
	switch {
	case !ok:
		return 0, errors.New(quoteValue(v) + " is not an integer")
	case len(mant) == 0:
		return 0, nil
	case exp < 0:
		return 0, errors.New(quoteValue(v) + " is not an integer: it has a fraction")
	}
	limit := uint64(1) << (bits - 1) // the magnitude of the minimum
	if v[0] != '-' {
		limit--
	}
	overflow := len(mant)+exp > 19 // 10^19 > 2^63
	var n uint64
	for _, c := range mant {
		if overflow {
			break
		}
		d := uint64(c - '0')
		overflow = n > (limit-d)/10
		n = n*10 + d
	}
	for i := 0; i < exp && !overflow; i++ {
		overflow = n > limit/10
		n *= 10
	}
	if overflow {
		return 0, errors.New(quoteValue(v) + " overflows " + typ)
	}
	if v[0] == '-' {
		return -int64(n), nil
	}
	return int64(n), nil
}

// decimal takes a JSON number apart as mant × 10^exp, mant its significant
// digits without leading or trailing zeros (empty for zero). An exponent
// too large to matter is clamped. ok is false for anything not a number.
func decimal(v []byte) (mant []byte, exp int, ok bool) {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	start := i
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i == start {
		return nil, 0, false
	}
	mant = v[start:i]
	if i < len(v) && v[i] == '.' {
		i++
		start = i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if i == start {
			return nil, 0, false
		}
		frac := v[start:i]
		mant = append(append(make([]byte, 0, len(mant)+len(frac)), mant...), frac...)
		exp = -len(frac)
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		neg := false
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			neg = v[i] == '-'
			i++
		}
		start = i
		e := 0
		for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			// Beyond 10^8, far more than a document holds digits, a
			// non-zero mantissa overflows or has a fraction anyway.
			if e < 1e8 {
				e = e*10 + int(v[i]-'0')
			}
		}
		if i == start {
			return nil, 0, false
		}
		if neg {
			e = -e
		}
		exp += e
	}
	if i != len(v) {
		return nil, 0, false
	}
	for len(mant) > 0 && mant[0] == '0' {
		mant = mant[1:]
	}
	for len(mant) > 0 && mant[len(mant)-1] == '0' {
		mant = mant[:len(mant)-1]
		exp++
	}
	return mant, exp, true
}

// quoteValue shows a value in an error, cut to a readable length.
func quoteValue(v []byte) string {
	const max = 40
	if len(v) > max {
		return string(v[:max]) + "..."
	}
	return string(v)
}
