package sql

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// encodeRequest writes req as the host reads an abi.SQLRequest, without
// encoding/json: in a WebAssembly guest its reflection costs more than the
// rest of building a request, and a store's messages are escaped here once,
// a run of plain bytes at a time. Arguments are the values wireArg returns;
// numbers are written as encoding/json writes them, so a float64 without a
// fraction (3.0) is still sent as 3 and bound as an INTEGER.
func encodeRequest(req *abi.SQLRequest) ([]byte, error) {
	n := 32
	for i := range req.Statements {
		st := &req.Statements[i]
		n += len(st.SQL) + 32
		for _, a := range st.Args {
			switch v := a.(type) {
			case string:
				n += len(v) + len(v)/8 + 3
			case abi.SQLBlob:
				n += base64.StdEncoding.EncodedLen(len(v)) + 12
			default:
				n += 24
			}
		}
		for _, c := range st.JSONColumns {
			n += len(c) + 3
		}
	}
	b := make([]byte, 0, n)
	b = append(b, `{"statements":[`...)
	for i := range req.Statements {
		st := &req.Statements[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"sql":`...)
		b = appendSQL(b, st.SQL)
		if len(st.Args) > 0 {
			b = append(b, `,"args":[`...)
			for j, a := range st.Args {
				if j > 0 {
					b = append(b, ',')
				}
				var err error
				if b, err = appendArg(b, a); err != nil {
					return nil, err
				}
			}
			b = append(b, ']')
		}
		if len(st.JSONColumns) > 0 {
			b = append(b, `,"json_columns":[`...)
			for j, c := range st.JSONColumns {
				if j > 0 {
					b = append(b, ',')
				}
				b = guestjson.AppendString(b, c)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if req.Write {
		b = append(b, `,"write":true`...)
	}
	return append(b, '}'), nil
}

// appendSQL appends query as a JSON string. A plugin sends the same few
// statements on every call, and escaping one is a loop over every byte of
// its text, so the last few statements' literals are kept, found by the
// identity of the string (a constant's bytes never move or change).
func appendSQL(b []byte, query string) []byte {
	sqlLiterals.Lock()
	defer sqlLiterals.Unlock()
	for i := range sqlLiterals.q {
		if q := sqlLiterals.q[i]; len(q) == len(query) && unsafe.StringData(q) == unsafe.StringData(query) {
			return append(b, sqlLiterals.lit[i]...)
		}
	}
	start := len(b)
	b = guestjson.AppendString(b, query)
	i := sqlLiterals.next
	sqlLiterals.q[i], sqlLiterals.lit[i] = query, append(sqlLiterals.lit[i][:0], b[start:]...)
	sqlLiterals.next = (i + 1) % len(sqlLiterals.q)
	return b
}

// sqlLiterals are the statements appendSQL escaped last.
var sqlLiterals struct {
	sync.Mutex
	q    [8]string
	lit  [8][]byte
	next int
}

// appendArg appends one argument as wireArg converted it.
func appendArg(b []byte, a any) ([]byte, error) {
	switch v := a.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case string:
		return guestjson.AppendString(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int8:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int16:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint16:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case float32:
		return appendFloat(b, float64(v), 32)
	case float64:
		return appendFloat(b, v, 64)
	case json.RawMessage:
		// A message kept verbatim, sent as TEXT.
		return guestjson.AppendString(b, []byte(v)), nil
	case abi.SQLBlob:
		b = append(b, `{"blob":"`...)
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, `"}`...), nil
	}
	return nil, errUnsupported(a)
}

// appendFloat appends f as encoding/json does (shortest form, exponent
// outside [1e-6, 1e21)); NaN and infinities are not JSON and fail the
// request, as they do with encoding/json.
func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, &abi.Error{Code: abi.CodeInvalidArgument, Message: "unsupported value " + strconv.FormatFloat(f, 'g', -1, bits)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
