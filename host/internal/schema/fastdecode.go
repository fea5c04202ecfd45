package schema

import (
	"encoding/json"

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
func decodeFast(doc []byte) (v any, ok bool) {
	d := guestjson.NewDecoder(doc)
	v, err := fastValue(&d)
	if err != nil || d.End() != nil {
		return nil, false
	}
	return v, true
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
		return json.Number(n), err
	}
}
