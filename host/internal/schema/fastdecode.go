package schema

import (
	"encoding/json"
	"unicode/utf8"
)

// maxFastDepth is the deepest nesting decodeFast handles itself; deeper
// documents go to encoding/json, which bounds its own depth.
const maxFastDepth = 256

// decodeFast decodes a document the common way in one pass: what
// json.Decoder with UseNumber makes of it (maps, slices, strings,
// json.Number, bools, nil), exactly one value with only whitespace around
// it. It reads the bytes once where json.Decoder reads them twice (once to
// find the value's end, once to decode it) and copies them into a buffer
// of its own first.
//
// ok is false whenever the document is not plainly valid JSON or needs a
// rule decodeFast does not implement: any syntax error, invalid UTF-8 in a
// string (encoding/json replaces it), an escaped UTF-16 surrogate (it pairs
// or replaces them), nesting deeper than maxFastDepth. The caller then
// decodes it with encoding/json, which accepts or refuses it and says
// why: decodeFast never accepts what encoding/json refuses, and whatever it
// accepts it decodes to the same value (FuzzDecodeFast).
func decodeFast(doc []byte) (v any, ok bool) {
	d := fastDecoder{b: doc}
	d.ws()
	v, ok = d.value(0)
	if !ok {
		return nil, false
	}
	d.ws()
	return v, d.i == len(d.b)
}

type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		if depth >= maxFastDepth {
			return nil, false
		}
		return d.object(depth + 1)
	case c == '[':
		if depth >= maxFastDepth {
			return nil, false
		}
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.str()
		return s, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *fastDecoder) literal(lit string) bool {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

func (d *fastDecoder) object(depth int) (any, bool) {
	d.i++ // '{'
	m := map[string]any{}
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.ws()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v // the last of duplicate keys wins, as in encoding/json
		d.ws()
		if d.i >= len(d.b) {
			return nil, false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
			d.ws()
		case '}':
			d.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *fastDecoder) array(depth int) (any, bool) {
	d.i++ // '['
	a := []any{}
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.ws()
		if d.i >= len(d.b) {
			return nil, false
		}
		switch d.b[d.i] {
		case ',':
			d.i++
			d.ws()
		case ']':
			d.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// number reads a number with RFC 8259's grammar, as its literal text.
func (d *fastDecoder) number() (any, bool) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return nil, false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if !d.digits() {
			return nil, false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return nil, false
		}
	}
	return json.Number(d.b[start:d.i]), true
}

// digits reads one or more decimal digits.
func (d *fastDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// str reads a string. A string without escapes becomes one conversion of
// its bytes; escapes are decoded into a buffer.
func (d *fastDecoder) str() (string, bool) {
	d.i++ // '"'
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return string(s), true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n <= 1 {
				return "", false
			}
			d.i += n
		}
	}
	return "", false
}

// escaped continues str from its first backslash.
func (d *fastDecoder) escaped(start int) (string, bool) {
	buf := make([]byte, 0, d.i-start+16)
	buf = append(buf, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(buf), true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", false
			}
			e := d.b[d.i+1]
			d.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := d.hex4()
				// Surrogates pair up or become U+FFFD in encoding/json:
				// that is its rule to apply.
				if !ok || (r >= 0xD800 && r < 0xE000) {
					return "", false
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			d.i++
		default:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n <= 1 {
				return "", false
			}
			buf = append(buf, d.b[d.i:d.i+n]...)
			d.i += n
		}
	}
	return "", false
}

func (d *fastDecoder) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	d.i += 4
	return r, true
}
