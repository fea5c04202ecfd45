package pgcap

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
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
	Statements []struct {
		SQL         string            `json:"sql"`
		Args        []json.RawMessage `json:"args"`
		JSONColumns []string          `json:"json_columns"`
	} `json:"statements"`
}

func decodeRequest(b []byte) ([]statement, error) {
	var req wireRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: decode request: %v", err)
	}
	if len(req.Statements) == 0 {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: request has no statements")
	}
	out := make([]statement, len(req.Statements))
	for i, st := range req.Statements {
		if strings.TrimSpace(st.SQL) == "" {
			return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: statement %d is empty", i)
		}
		if strings.IndexByte(st.SQL, 0) >= 0 {
			return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: statement %d holds a NUL byte", i)
		}
		out[i].sql = st.SQL
		if len(st.JSONColumns) > 0 {
			out[i].json = make(map[string]bool, len(st.JSONColumns))
			for _, c := range st.JSONColumns {
				out[i].json[c] = true
			}
		}
		out[i].values = make([][]byte, len(st.Args))
		out[i].oids = make([]uint32, len(st.Args))
		for j, raw := range st.Args {
			v, oid, err := decodeArg(raw)
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: statement %d argument %d: %v", i, j+1, err)
			}
			out[i].values[j], out[i].oids[j] = v, oid
		}
	}
	return out, nil
}

func decodeArg(raw json.RawMessage) ([]byte, uint32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, 0, errors.New("missing value")
	}
	switch raw[0] {
	case 'n':
		if string(raw) == "null" {
			return nil, oidUnknown, nil
		}
	case 't':
		if string(raw) == "true" {
			return []byte("t"), oidBool, nil
		}
	case 'f':
		if string(raw) == "false" {
			return []byte("f"), oidBool, nil
		}
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, 0, err
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, 0, errors.New("PostgreSQL text cannot hold a NUL character: use a blob")
		}
		return []byte(s), oidUnknown, nil
	case '{':
		var b abi.SQLBlob
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, 0, err
		}
		return append([]byte(`\x`), hex.EncodeToString(b)...), oidBytea, nil
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, 0, err
		}
		if !strings.ContainsAny(string(n), ".eE") {
			if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				return strconv.AppendInt(nil, i, 10), oidInt8, nil
			}
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return nil, 0, err
		}
		return strconv.AppendFloat(nil, f, 'g', -1, 64), oidFloat8, nil
	}
	return nil, 0, fmt.Errorf("unsupported value %.40s", raw)
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
