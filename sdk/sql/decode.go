package sql

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
)

// decodeResponse decodes an abi.SQLResponse. encoding/json runs at about
// 1 MB/s in a preemptible WebAssembly guest, and a provide's rows are ten
// kilobytes and more, so the rows are split by a hand-written scanner that
// slices values out without decoding them. Input it does not expect goes
// to encoding/json instead.
func decodeResponse(b []byte) (abi.SQLResponse, error) {
	if resp, ok := scanResponse(b); ok {
		return resp, nil
	}
	var resp abi.SQLResponse
	err := json.Unmarshal(b, &resp)
	return resp, err
}

var errScan = errors.New("unexpected input")

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return errScan
	}
	s.i++
	return nil
}

// value skips one JSON value and returns its bytes.
func (s *scanner) value() ([]byte, error) {
	c := s.peek() // skips white space: the value starts after it
	start := s.i
	switch c {
	case '"':
		s.i++
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '\\':
				s.i += 2
				continue
			case '"':
				s.i++
				return s.b[start:s.i], nil
			}
			s.i++
		}
		return nil, errScan
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, err := s.value(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return s.b[start:s.i], nil
				}
			}
			s.i++
		}
		return nil, errScan
	case 0:
		return nil, errScan
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
				return s.literal(start)
			}
			s.i++
		}
		return s.literal(start)
	}
}

// literal returns the number, true, false or null that started at start.
func (s *scanner) literal(start int) ([]byte, error) {
	if s.i == start {
		return nil, errScan
	}
	return s.b[start:s.i], nil
}

// object calls field for each member of an object.
func (s *scanner) object(field func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.value()
		if err != nil || key[0] != '"' {
			return errScan
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := field(key[1 : len(key)-1]); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errScan
		}
	}
}

// array calls elem for each element of an array.
func (s *scanner) array(elem func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return errScan
		}
	}
}

func scanResponse(b []byte) (abi.SQLResponse, bool) {
	var resp abi.SQLResponse
	s := &scanner{b: b}
	err := s.object(func(key []byte) error {
		if string(key) != "results" {
			_, err := s.value()
			return err
		}
		resp.Results = []abi.SQLResult{}
		return s.array(func() error {
			var r abi.SQLResult
			err := s.object(func(key []byte) error {
				switch string(key) {
				case "columns":
					return s.array(func() error {
						v, err := s.value()
						if err != nil || v[0] != '"' {
							return errScan
						}
						name, err := unquote(v)
						r.Columns = append(r.Columns, name)
						return err
					})
				case "rows":
					return s.array(func() error {
						row := make([]json.RawMessage, 0, len(r.Columns))
						err := s.array(func() error {
							v, err := s.value()
							row = append(row, v)
							return err
						})
						r.Rows = append(r.Rows, row)
						return err
					})
				case "rows_affected", "last_insert_id":
					v, err := s.value()
					if err != nil {
						return err
					}
					n, err := strconv.ParseInt(string(v), 10, 64)
					if string(key) == "rows_affected" {
						r.RowsAffected = n
					} else {
						r.LastInsertID = n
					}
					return err
				}
				_, err := s.value()
				return err
			})
			resp.Results = append(resp.Results, r)
			return err
		})
	})
	if err != nil || s.peek() != 0 {
		return abi.SQLResponse{}, false
	}
	return resp, true
}
