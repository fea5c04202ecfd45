package sqlwire

import (
	"encoding/json"
	"errors"
	"sync"

	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// errNotPlain stops decodeRequestFast at what it leaves to encoding/json.
var errNotPlain = errors.New("not a plain request")

// decodeRequestFast decodes a request the common way, in one validating
// pass of guestjson: into what json.Unmarshal makes of it in a request
// struct of Statements []WireStatement and, with withWrite, Write bool
// (without it a "write" member is skipped, as encoding/json skips a field
// the struct lacks).
//
// ok is false whenever the request is not valid JSON of that shape or
// needs a rule of encoding/json this decoder does not implement: a syntax
// error, nesting past guestjson.MaxDepth, a member other than those named
// exactly (encoding/json also matches keys in another case), a duplicate
// member (encoding/json decodes the second over the first), a value of
// another type. The caller then decodes it with encoding/json, which
// accepts or refuses it and says why as it always has: this decoder never
// accepts what encoding/json refuses, and whatever it accepts it decodes
// to the same value (FuzzDecodeRequestFast). The arguments alias b.
func decodeRequestFast(b []byte, withWrite bool) (sts []WireStatement, write, ok bool) {
	d := guestjson.NewDecoder(b)
	if d.Peek() != '{' {
		return nil, false, false
	}
	var seen uint8
	err := d.Object(func(key []byte) error {
		switch string(key) {
		case "statements":
			if seen&1 != 0 || d.Peek() != '[' {
				return errNotPlain
			}
			seen |= 1
			sts = []WireStatement{}
			return d.Array(func() error {
				st, err := decodeStatement(&d)
				sts = append(sts, st)
				return err
			})
		case "write":
			if !withWrite {
				return d.Skip()
			}
			if seen&2 != 0 {
				return errNotPlain
			}
			seen |= 2
			switch d.Peek() {
			case 't':
				write = true
			case 'f':
				write = false
			default:
				return errNotPlain
			}
			return d.Skip()
		}
		return errNotPlain
	})
	if err != nil || d.End() != nil {
		return nil, false, false
	}
	return sts, write, true
}

// decodeStatement decodes one statement object.
func decodeStatement(d *guestjson.Decoder) (st WireStatement, err error) {
	if d.Peek() != '{' {
		return st, errNotPlain
	}
	var seen uint8
	err = d.Object(func(key []byte) error {
		switch {
		case string(key) == "sql" && seen&1 == 0:
			seen |= 1
			if d.Peek() != '"' {
				return errNotPlain
			}
			var err error
			st.SQL, err = readSQL(d)
			return err
		case string(key) == "args" && seen&2 == 0:
			seen |= 2
			if d.Peek() != '[' {
				return errNotPlain
			}
			st.Args = []json.RawMessage{}
			return d.Array(func() error {
				v, err := d.ReadValue()
				st.Args = append(st.Args, v)
				return err
			})
		case string(key) == "json_columns" && seen&4 == 0:
			seen |= 4
			if d.Peek() != '[' {
				return errNotPlain
			}
			st.JSONColumns = []string{}
			return d.Array(func() error {
				if d.Peek() != '"' {
					return errNotPlain
				}
				c, err := d.ReadString()
				st.JSONColumns = append(st.JSONColumns, c)
				return err
			})
		}
		return errNotPlain
	})
	return st, err
}

// decodeStringArg decodes a string argument as json.Unmarshal does, in
// one pass; ok is false if raw is anything but exactly one string.
func decodeStringArg(raw []byte) (s string, ok bool) {
	d := guestjson.NewDecoder(raw)
	if d.Peek() != '"' {
		return "", false
	}
	s, err := d.ReadString()
	if err != nil || d.End() != nil {
		return "", false
	}
	return s, true
}

// sqlTexts are the statements' SQL texts decoded so far, by their JSON
// string exactly as a request wrote it: a plugin sends the same few
// statements on every call, each a string of some hundred bytes with
// escaped newlines, and decoding them again was an unescaping buffer and
// a string per statement, 2.8 kB of a sqlite turn. The same bytes decode
// to the same text, so a remembered text is what decoding would give. It
// holds at most maxSQLTexts texts of at most maxSQLTextBytes in all, and
// starts over when full, so a plugin that sends ever new statements costs
// what it did before and holds no more memory.
var sqlTexts struct {
	mu    sync.Mutex
	m     map[string]string
	bytes int
}

const (
	maxSQLTexts     = 256
	maxSQLTextBytes = 256 << 10
)

// readSQL reads a statement's SQL string, from sqlTexts when it has it.
func readSQL(d *guestjson.Decoder) (string, error) {
	raw, err := d.ReadValue()
	if err != nil {
		return "", err
	}
	sqlTexts.mu.Lock()
	s, ok := sqlTexts.m[string(raw)]
	sqlTexts.mu.Unlock()
	if ok {
		return s, nil
	}
	sd := guestjson.NewDecoder(raw)
	if s, err = sd.ReadString(); err != nil {
		return "", err
	}
	if size := len(raw) + len(s); size <= maxSQLTextBytes/16 {
		sqlTexts.mu.Lock()
		if sqlTexts.m == nil || len(sqlTexts.m) >= maxSQLTexts || sqlTexts.bytes+size > maxSQLTextBytes {
			sqlTexts.m, sqlTexts.bytes = make(map[string]string), 0
		}
		if _, dup := sqlTexts.m[string(raw)]; !dup {
			sqlTexts.m[string(raw)] = s
			sqlTexts.bytes += size
		}
		sqlTexts.mu.Unlock()
	}
	return s, nil
}
