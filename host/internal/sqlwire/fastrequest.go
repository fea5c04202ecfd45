package sqlwire

import (
	"encoding/json"
	"unicode/utf8"
)

// maxFastDepth is the deepest nesting of an argument decodeRequestFast
// reads itself; a deeper one goes to encoding/json, which bounds its own.
const maxFastDepth = 64

// decodeRequestFast decodes a request the common way in one pass: into
// what json.Unmarshal makes of it in a request struct of Statements
// []WireStatement and, if write is true, Write bool (without it, a "write"
// member is ignored as encoding/json ignores a field the struct lacks).
//
// ok is false whenever the request is not plainly valid JSON of that shape
// or needs a rule of encoding/json this decoder does not implement: any
// syntax error, a member other than those named exactly (encoding/json
// matches keys without regard to case), a duplicate member, a null or a
// value of another type, an escape in a key, an escaped UTF-16 surrogate or
// invalid UTF-8 in a decoded string (encoding/json pairs or replaces them),
// arguments nested deeper than maxFastDepth. The caller then decodes it
// with encoding/json, which accepts or refuses it and says why: this
// decoder never accepts what encoding/json refuses, and whatever it accepts
// it decodes to the same value (FuzzDecodeRequestFast). The arguments alias
// b.
func decodeRequestFast(b []byte, withWrite bool) (sts []WireStatement, write, ok bool) {
	d := reqDecoder{b: b}
	d.ws()
	if !d.eat('{') {
		return nil, false, false
	}
	d.ws()
	if d.eat('}') {
		d.ws()
		return nil, false, d.i == len(d.b)
	}
	var seen uint8
	for {
		k, ok := d.key()
		if !ok {
			return nil, false, false
		}
		switch string(k) {
		case "statements":
			if seen&1 != 0 {
				return nil, false, false
			}
			seen |= 1
			if sts, ok = d.statements(); !ok {
				return nil, false, false
			}
		case "write":
			if !withWrite {
				// Not a field of the struct: encoding/json skips it.
				if !d.skip(0) {
					return nil, false, false
				}
				break
			}
			if seen&2 != 0 {
				return nil, false, false
			}
			seen |= 2
			switch {
			case d.literal("true"):
				write = true
			case d.literal("false"):
				write = false
			default:
				return nil, false, false
			}
		default:
			return nil, false, false
		}
		d.ws()
		switch {
		case d.eat(','):
			d.ws()
		case d.eat('}'):
			d.ws()
			return sts, write, d.i == len(d.b)
		default:
			return nil, false, false
		}
	}
}

type reqDecoder struct {
	b []byte
	i int
}

func (d *reqDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// eat consumes c if it is next.
func (d *reqDecoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *reqDecoder) literal(lit string) bool {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

// key reads a member's key, plain ASCII without escapes, and the colon
// after it, leaving d at the value.
func (d *reqDecoder) key() ([]byte, bool) {
	if !d.eat('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) && d.b[d.i] != '"' {
		if c := d.b[d.i]; c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			return nil, false
		}
		d.i++
	}
	if d.i >= len(d.b) {
		return nil, false
	}
	k := d.b[start:d.i]
	d.i++
	d.ws()
	if !d.eat(':') {
		return nil, false
	}
	d.ws()
	return k, true
}

func (d *reqDecoder) statements() ([]WireStatement, bool) {
	if !d.eat('[') {
		return nil, false
	}
	sts := []WireStatement{}
	d.ws()
	if d.eat(']') {
		return sts, true
	}
	for {
		st, ok := d.statement()
		if !ok {
			return nil, false
		}
		sts = append(sts, st)
		d.ws()
		switch {
		case d.eat(','):
			d.ws()
		case d.eat(']'):
			return sts, true
		default:
			return nil, false
		}
	}
}

func (d *reqDecoder) statement() (st WireStatement, ok bool) {
	if !d.eat('{') {
		return st, false
	}
	d.ws()
	if d.eat('}') {
		return st, true
	}
	var seen uint8
	for {
		k, ok := d.key()
		if !ok {
			return st, false
		}
		switch {
		case string(k) == "sql" && seen&1 == 0:
			seen |= 1
			if st.SQL, ok = d.str(); !ok {
				return st, false
			}
		case string(k) == "args" && seen&2 == 0:
			seen |= 2
			if st.Args, ok = d.args(); !ok {
				return st, false
			}
		case string(k) == "json_columns" && seen&4 == 0:
			seen |= 4
			if st.JSONColumns, ok = d.strs(); !ok {
				return st, false
			}
		default:
			return st, false
		}
		d.ws()
		switch {
		case d.eat(','):
			d.ws()
		case d.eat('}'):
			return st, true
		default:
			return st, false
		}
	}
}

// args reads an array of values, each as its bytes in b.
func (d *reqDecoder) args() ([]json.RawMessage, bool) {
	if !d.eat('[') {
		return nil, false
	}
	d.ws()
	if d.eat(']') {
		return []json.RawMessage{}, true
	}
	var a []json.RawMessage
	for {
		start := d.i
		if !d.skip(0) {
			return nil, false
		}
		a = append(a, d.b[start:d.i:d.i])
		d.ws()
		switch {
		case d.eat(','):
			d.ws()
		case d.eat(']'):
			return a, true
		default:
			return nil, false
		}
	}
}

// strs reads an array of strings.
func (d *reqDecoder) strs() ([]string, bool) {
	if !d.eat('[') {
		return nil, false
	}
	d.ws()
	if d.eat(']') {
		return []string{}, true
	}
	var a []string
	for {
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		a = append(a, s)
		d.ws()
		switch {
		case d.eat(','):
			d.ws()
		case d.eat(']'):
			return a, true
		default:
			return nil, false
		}
	}
}

// str reads a string and decodes it.
func (d *reqDecoder) str() (string, bool) {
	s, n, ok := unquote(d.b[d.i:])
	d.i += n
	return s, ok
}

// unquote decodes the JSON string that b starts with and says how many
// bytes it took. ok is false for a string that is not plainly valid: an
// unterminated one, a control character, a bad escape, an escaped
// surrogate or invalid UTF-8.
func unquote(b []byte) (s string, n int, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", 0, false
	}
	i := 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(b[1:i]), i + 1, true
		case c == '\\':
			return unquoteEscaped(b, i)
		case c < 0x20:
			return "", 0, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", 0, false
			}
			i += size
		}
	}
	return "", 0, false
}

// unquoteEscaped continues unquote from the first backslash, at i.
func unquoteEscaped(b []byte, i int) (string, int, bool) {
	buf := make([]byte, 0, i+64)
	buf = append(buf, b[1:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return string(buf), i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return "", 0, false
			}
			e := b[i+1]
			i += 2
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
				r, ok := hex4(b[i:])
				// Surrogates pair up or become U+FFFD in encoding/json:
				// that is its rule to apply.
				if !ok || (r >= 0xD800 && r < 0xE000) {
					return "", 0, false
				}
				buf = utf8.AppendRune(buf, r)
				i += 4
			default:
				return "", 0, false
			}
		case c < 0x20:
			return "", 0, false
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return "", 0, false
			}
			buf = append(buf, b[i:i+size]...)
			i += size
		}
	}
	return "", 0, false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
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
	return r, true
}

// skip reads one value of any kind, checking its syntax as
// json.Valid does (a string's bytes are not checked for UTF-8: a
// json.RawMessage keeps them as they are).
func (d *reqDecoder) skip(depth int) bool {
	if d.i >= len(d.b) {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		return d.skipString()
	case c == '{':
		if depth >= maxFastDepth {
			return false
		}
		d.i++
		d.ws()
		if d.eat('}') {
			return true
		}
		for {
			if d.i >= len(d.b) || d.b[d.i] != '"' || !d.skipString() {
				return false
			}
			d.ws()
			if !d.eat(':') {
				return false
			}
			d.ws()
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			switch {
			case d.eat(','):
				d.ws()
			case d.eat('}'):
				return true
			default:
				return false
			}
		}
	case c == '[':
		if depth >= maxFastDepth {
			return false
		}
		d.i++
		d.ws()
		if d.eat(']') {
			return true
		}
		for {
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			switch {
			case d.eat(','):
				d.ws()
			case d.eat(']'):
				return true
			default:
				return false
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	}
	return false
}

// skipString reads a string, checking its escapes.
func (d *reqDecoder) skipString() bool {
	d.i++ // '"'
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return false
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if _, ok := hex4(d.b[d.i+2:]); !ok {
					return false
				}
				d.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			d.i++
		}
	}
	return false
}

// number reads a number with RFC 8259's grammar.
func (d *reqDecoder) number() bool {
	d.eat('-')
	switch {
	case d.eat('0'):
	case d.i < len(d.b) && d.b[d.i] >= '1' && d.b[d.i] <= '9':
		d.digits()
	default:
		return false
	}
	if d.eat('.') && !d.digits() {
		return false
	}
	if d.eat('e') || d.eat('E') {
		if !d.eat('+') {
			d.eat('-')
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

// digits reads one or more decimal digits.
func (d *reqDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}
