package sqlwire

import (
	"bytes"
	"encoding/json"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// Writer frames the results of one request as JSON while counting rows and
// bytes against the request's limits:
//
//	{"results":[{"columns":[…],"rows":[[…],…]},{…counts…}],"dialect":"…"}
//
// The backend appends each value to Buf itself and, for a statement
// without columns, its counts and the closing brace.
type Writer struct {
	Buf    []byte
	limits Limits
	rows   int // rows of all statements so far
	n      int // results begun
}

// NewWriter returns a Writer of a request under l.
func NewWriter(l Limits) Writer {
	return Writer{limits: l, Buf: append(make([]byte, 0, 512), `{"results":[`...)}
}

// Begin opens the next statement's result.
func (w *Writer) Begin() {
	if w.n > 0 {
		w.Buf = append(w.Buf, ',')
	}
	w.n++
	w.Buf = append(w.Buf, '{')
}

// Column appends column i's name, the first one opening the columns.
func (w *Writer) Column(i int, name string) {
	if i == 0 {
		w.Buf = append(w.Buf, `"columns":[`...)
	} else {
		w.Buf = append(w.Buf, ',')
	}
	w.Buf = AppendString(w.Buf, name)
}

// Rows closes the columns and opens the rows.
func (w *Writer) Rows() { w.Buf = append(w.Buf, `],"rows":[`...) }

// Row opens row r of the statement, failing past the request's rows.
func (w *Writer) Row(r int) *abi.Error {
	if w.rows++; w.rows > w.limits.MaxRows {
		return abi.Errorf(abi.CodeResourceExhausted, "sql: result exceeds the limit of %d rows; use LIMIT and page", w.limits.MaxRows)
	}
	if r > 0 {
		w.Buf = append(w.Buf, ',')
	}
	w.Buf = append(w.Buf, '[')
	return nil
}

// Value separates value i of a row from the one before it.
func (w *Writer) Value(i int) {
	if i > 0 {
		w.Buf = append(w.Buf, ',')
	}
}

// EndRow closes a row, failing past the request's bytes.
func (w *Writer) EndRow() *abi.Error {
	w.Buf = append(w.Buf, ']')
	if len(w.Buf) > w.limits.MaxResultBytes {
		return abi.Errorf(abi.CodeResourceExhausted, "sql: result exceeds the limit of %d bytes; use LIMIT and page", w.limits.MaxResultBytes)
	}
	return nil
}

// End closes the rows and the statement's result.
func (w *Writer) End() { w.Buf = append(w.Buf, "]}"...) }

// Finish closes the results and names the dialect (ABI 1.2).
func (w *Writer) Finish(dialect string) []byte {
	w.Buf = append(w.Buf, `],"dialect":"`...)
	w.Buf = append(w.Buf, dialect...)
	return append(w.Buf, `"}`...)
}

// AppendJSON appends text, a JSON column's value, as the JSON it holds,
// compacted (so the row stays one line and the plugin can pass it on
// verbatim).
func AppendJSON(b []byte, col string, text []byte) ([]byte, *abi.Error) {
	if isCompactJSON(text) {
		return append(b, text...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, text); err != nil {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: JSON column %q holds invalid JSON: %v", col, err)
	}
	return buf.Bytes(), nil
}

// AppendString appends s as a JSON string (guestjson.AppendString).
func AppendString(b []byte, s string) []byte { return guestjson.AppendString(b, s) }
