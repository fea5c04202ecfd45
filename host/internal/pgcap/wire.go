package pgcap

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
)

// PostgreSQL type oids the capability encodes or decodes itself.
const (
	oidUnknown = 0
	oidBool    = 16
	oidBytea   = 17
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidOID     = 26
	oidFloat4  = 700
	oidFloat8  = 701
	oidNumeric = 1700
	// oidTextArray is text[], for the host's own statements only.
	oidTextArray = 1009
)

// statement is one decoded request statement, its arguments in
// PostgreSQL's text format with their types: integers int8, other numbers
// float8, booleans bool, blobs bytea, and strings of unknown type, which
// the server types from where they are used (as it types a quoted
// literal), so a string can fill a json, integer or timestamp column.
type statement struct {
	sql    string
	values [][]byte
	oids   []uint32
	json   map[string]bool
}

type wireRequest struct {
	Statements []sqlwire.WireStatement `json:"statements"`
}

// arg is one argument in PostgreSQL's text format and its type.
type arg struct {
	value []byte
	oid   uint32
}

func decodeRequest(b []byte) ([]statement, error) {
	var req wireRequest
	if err := sqlwire.DecodeRequest(b, &req, &req.Statements, nil); err != nil {
		return nil, err
	}
	sts, err := sqlwire.DecodeStatements(req.Statements, checkSQL, decodeArg)
	if err != nil {
		return nil, err
	}
	out := make([]statement, len(sts))
	for i, st := range sts {
		out[i] = statement{sql: st.SQL, json: st.JSON, values: make([][]byte, len(st.Args)), oids: make([]uint32, len(st.Args))}
		for j, a := range st.Args {
			out[i].values[j], out[i].oids[j] = a.value, a.oid
		}
	}
	return out, nil
}

func checkSQL(sql string) string {
	if strings.IndexByte(sql, 0) >= 0 {
		return "holds a NUL byte"
	}
	return ""
}

func decodeArg(_ int, v any) (arg, error) {
	switch v := v.(type) {
	case nil:
		return arg{nil, oidUnknown}, nil
	case bool:
		if v {
			return arg{[]byte("t"), oidBool}, nil
		}
		return arg{[]byte("f"), oidBool}, nil
	case string:
		if strings.IndexByte(v, 0) >= 0 {
			return arg{}, errors.New("PostgreSQL text cannot hold a NUL character: use a blob")
		}
		return arg{[]byte(v), oidUnknown}, nil
	case []byte:
		return arg{append([]byte(`\x`), hex.EncodeToString(v)...), oidBytea}, nil
	case int64:
		return arg{strconv.AppendInt(nil, v, 10), oidInt8}, nil
	case float64:
		return arg{strconv.AppendFloat(nil, v, 'g', -1, 64), oidFloat8}, nil
	}
	return arg{}, fmt.Errorf("unsupported value %T", v)
}

// resultWriter encodes results straight to JSON while counting rows and
// bytes against the request's limits.
type resultWriter struct {
	sqlwire.Writer
	columns bool
}

func newResultWriter(l Limits) *resultWriter {
	return &resultWriter{Writer: sqlwire.NewWriter(l)}
}

// statement writes the rows of rr. Over a limit it cancels the statement
// (through stop) instead of reading the rest.
func (w *resultWriter) statement(rr *pgconn.ResultReader, jsonCols map[string]bool, stop func()) *abi.Error {
	w.Begin()
	fields := rr.FieldDescriptions()
	w.columns = len(fields) > 0
	if !w.columns {
		return nil
	}
	asJSON := make([]bool, len(fields))
	for i, f := range fields {
		w.Column(i, f.Name)
		asJSON[i] = jsonCols[f.Name]
	}
	w.Rows()
	for r := 0; rr.NextRow(); r++ {
		if err := w.Row(r); err != nil {
			stop()
			return err
		}
		for i, v := range rr.Values() {
			w.Value(i)
			if asJSON[i] {
				var err *abi.Error
				if w.Buf, err = appendJSON(w.Buf, fields[i].Name, v); err != nil {
					stop()
					return err
				}
				continue
			}
			w.Buf = appendValue(w.Buf, fields[i].DataTypeOID, v)
		}
		if err := w.EndRow(); err != nil {
			stop()
			return err
		}
	}
	w.End()
	return nil
}

// counts completes a result without columns with the rows the statement
// changed. PostgreSQL has no last insert id: use RETURNING.
func (w *resultWriter) counts(tag pgconn.CommandTag) {
	if w.columns {
		return
	}
	w.Buf = append(w.Buf, `"rows_affected":`...)
	w.Buf = strconv.AppendInt(w.Buf, tag.RowsAffected(), 10)
	w.Buf = append(w.Buf, '}')
}

func (w *resultWriter) finish() []byte { return w.Finish(abi.DialectPostgres) }

// appendValue appends a value in PostgreSQL's text format as the JSON the
// ABI gives its type: numbers as numbers, booleans as 1 and 0 (as SQLite
// has them), bytea as a blob, everything else as text.
func appendValue(b []byte, oid uint32, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidOID:
		return append(b, v...)
	case oidFloat4, oidFloat8, oidNumeric:
		switch string(v) {
		case "Infinity":
			return append(b, `"+Inf"`...)
		case "-Infinity":
			return append(b, `"-Inf"`...)
		case "NaN":
			return append(b, "null"...)
		}
		return append(b, v...)
	case oidBool:
		if len(v) > 0 && v[0] == 't' {
			return append(b, '1')
		}
		return append(b, '0')
	case oidBytea:
		raw, err := hex.DecodeString(strings.TrimPrefix(string(v), `\x`))
		if err != nil {
			return sqlwire.AppendString(b, string(v))
		}
		b = append(b, `{"blob":"`...)
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, `"}`...)
	}
	return sqlwire.AppendString(b, string(v))
}

// appendJSON appends a JSON column's value as the JSON it holds, compacted.
func appendJSON(b []byte, col string, v []byte) ([]byte, *abi.Error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	return sqlwire.AppendJSON(b, col, v)
}
