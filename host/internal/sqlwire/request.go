package sqlwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
)

// WireStatement is a statement as a request carries it. It is an alias of
// the unnamed struct so that decoding errors, which plugins see, name the
// type as they always have.
type WireStatement = struct {
	SQL         string            `json:"sql"`
	Args        []json.RawMessage `json:"args"`
	JSONColumns []string          `json:"json_columns"`
}

// DecodeRequest unmarshals request b into req, a backend's request struct
// whose Statements field is a []WireStatement, sts, and whose Write field
// is write, or nil if it has none. A plain request is decoded in one pass
// (decodeRequestFast); anything else by encoding/json, whose errors name
// req's type as they always have.
func DecodeRequest(b []byte, req any, sts *[]WireStatement, write *bool) *abi.Error {
	if s, w, ok := decodeRequestFast(b, write != nil); ok {
		*sts = s
		if write != nil {
			*write = w
		}
		return nil
	}
	if err := json.Unmarshal(b, req); err != nil {
		return abi.Errorf(abi.CodeInvalidArgument, "sql: decode request: %v", err)
	}
	return nil
}

// Statement is one checked request statement, its arguments decoded.
type Statement[A any] struct {
	SQL  string
	Args []A
	JSON map[string]bool // columns to embed as JSON
}

// DecodeStatements checks sts (there is one, none is blank, and check, if
// set, finds nothing wrong with its SQL) and decodes argument j of each
// with arg from what DecodeArg makes of it.
func DecodeStatements[A any](sts []WireStatement, check func(sql string) string, arg func(j int, v any) (A, error)) ([]Statement[A], *abi.Error) {
	if len(sts) == 0 {
		return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: request has no statements")
	}
	out := make([]Statement[A], len(sts))
	for i, st := range sts {
		if strings.TrimSpace(st.SQL) == "" {
			return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: statement %d is empty", i)
		}
		if check != nil {
			if bad := check(st.SQL); bad != "" {
				return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: statement %d %s", i, bad)
			}
		}
		out[i].SQL = st.SQL
		if len(st.JSONColumns) > 0 {
			out[i].JSON = make(map[string]bool, len(st.JSONColumns))
			for _, c := range st.JSONColumns {
				out[i].JSON[c] = true
			}
		}
		out[i].Args = make([]A, len(st.Args))
		for j, raw := range st.Args {
			v, err := DecodeArg(raw)
			if err == nil {
				out[i].Args[j], err = arg(j, v)
			}
			if err != nil {
				return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: statement %d argument %d: %v", i, j+1, err)
			}
		}
	}
	return out, nil
}

// DecodeArg decodes an argument's JSON: nil, a bool, a string, a []byte (a
// blob), an int64 (a number without fraction or exponent that fits) or a
// float64.
func DecodeArg(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, errors.New("missing value")
	}
	switch raw[0] {
	case 'n':
		if string(raw) == "null" {
			return nil, nil
		}
	case 't':
		if string(raw) == "true" {
			return true, nil
		}
	case 'f':
		if string(raw) == "false" {
			return false, nil
		}
	case '"':
		if s, ok := decodeStringArg(raw); ok {
			return s, nil
		}
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '{':
		var b abi.SQLBlob
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, err
		}
		return []byte(b), nil
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, err
		}
		if !strings.ContainsAny(string(n), ".eE") {
			if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				return i, nil
			}
		}
		return strconv.ParseFloat(string(n), 64)
	}
	return nil, fmt.Errorf("unsupported value %.40s", raw)
}
