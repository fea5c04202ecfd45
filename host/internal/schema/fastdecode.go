package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// decodeFast decodes a document the common way in one pass: what
// json.Decoder with UseNumber makes of it (maps, slices, strings,
// json.Number, bools, nil), exactly one value with only whitespace around
// it. It reads the bytes once where json.Decoder reads them twice (once to
// find the value's end, once to decode it) and copies them into a buffer
// of its own first.
//
// The scanning is guestjson's, the project's one JSON scanner, which
// checks RFC 8259's grammar and decodes strings as encoding/json does
// (invalid UTF-8 and lone surrogates become U+FFFD); decodeFast only builds
// the values. ok is false whenever guestjson refuses the document: any
// syntax error, nesting deeper than guestjson.MaxDepth. The caller then
// decodes it with encoding/json, which refuses it (or, past MaxDepth,
// accepts it) and says why: decodeFast never accepts what encoding/json
// refuses, and whatever it accepts it decodes to the same value
// (FuzzDecodeFast).
//
// A number past the bounds of checkNumber is an error of its own (err),
// which the caller returns instead of decoding the document again.
func decodeFast(doc []byte) (v any, ok bool, err error) {
	d := guestjson.NewDecoder(doc)
	v, err = fastValue(&d)
	var big *numberError
	if errors.As(err, &big) {
		return nil, false, err
	}
	if err != nil || d.End() != nil {
		return nil, false, nil
	}
	return v, true, nil
}

// maxNumberLen and maxExponent bound the numbers a document may hold to
// be validated. The validator parses a number into a big.Rat at every
// subschema that checks it: one of a million digits, or with an exponent
// of a million, costs it seconds and gigabytes each time, and past an
// exponent of 10^6 the parse fails and the validator dereferences nil. At
// these bounds a parse takes microseconds; float64 reaches 1.8e308, and
// an int64 has 19 digits.
const (
	maxNumberLen = 1000
	maxExponent  = 1000
)

// numberError is a number past the bounds.
type numberError struct{ lit string }

func (e *numberError) Error() string {
	lit := e.lit
	if len(lit) > 24 {
		lit = lit[:20] + "..."
	}
	return fmt.Sprintf("number %s (%d characters): the host validates numbers of at most %d characters, with an exponent within ±%d", lit, len(e.lit), maxNumberLen, maxExponent)
}

// checkNumber refuses a number literal past maxNumberLen or maxExponent.
func checkNumber(lit string) error {
	if len(lit) > maxNumberLen {
		return &numberError{lit}
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil || e > maxExponent || e < -maxExponent {
			return &numberError{lit}
		}
	}
	return nil
}

// checkNumbers is checkNumber of every number in a decoded document.
func checkNumbers(v any) error {
	return eachValue(v, func(v any) error {
		if n, ok := v.(json.Number); ok {
			return checkNumber(string(n))
		}
		return nil
	})
}

// eachValue calls f on v and on every value nested in it, until f fails.
func eachValue(v any, f func(any) error) error {
	if err := f(v); err != nil {
		return err
	}
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if err := eachValue(e, f); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := eachValue(e, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// fastValue decodes the value at d's offset.
func fastValue(d *guestjson.Decoder) (any, error) {
	switch c := d.Peek(); c {
	case '{':
		m := map[string]any{}
		err := d.Object(func(key []byte) error {
			v, err := fastValue(d)
			m[string(key)] = v // the last of duplicate keys wins, as in encoding/json
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := d.Array(func() error {
			v, err := fastValue(d)
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		return d.ReadString()
	case 't', 'f':
		return c == 't', d.Skip()
	case 'n':
		return nil, d.ReadNull()
	default:
		// A number, as its literal text; or what ReadValue refuses.
		n, err := d.ReadValue()
		if err == nil {
			err = checkNumber(string(n))
		}
		return json.Number(n), err
	}
}
