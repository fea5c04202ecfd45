package sdk

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/wasmhist/wasmhist/abi"
)

// Every export decodes its request and encodes its response here rather than
// with encoding/json. Compiled to WebAssembly, encoding/json costs about
// 300 µs for a 1 KB store request and its response, ten times what moving
// the bytes through kernel memory costs, because it scans every byte several
// times and works through reflection. This codec makes one validating pass
// over the request, keeps each message as the exact bytes received (never
// decoding it), and writes the response by appending those bytes.
//
// The rarer exports use it too, and nothing on the guest's paths formats
// with fmt: a plugin that links neither encoding/json's codec nor fmt is
// about 1.4 MB smaller, and the host compiles (validates) the whole module
// on every load, cache or not, at a cost proportional to its size.

// errSyntax is wrapped by every decoding failure of this codec.
var errSyntax = errors.New("malformed JSON")

// maxDepth bounds nesting so that a hostile request cannot exhaust the
// guest's stack; encoding/json allows 10000, messages need far fewer.
const maxDepth = 1000

type decoder struct {
	b []byte
	i int
}

// syntaxError is a decoding failure at an offset of the input.
type syntaxError struct {
	offset int
	msg    string
}

func (e *syntaxError) Error() string {
	return errSyntax.Error() + " at offset " + strconv.Itoa(e.offset) + ": " + e.msg
}

func (e *syntaxError) Unwrap() error { return errSyntax }

func (d *decoder) fail(msg string) error {
	return &syntaxError{offset: d.i, msg: msg}
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, or 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// value checks one JSON value and returns its exact bytes.
func (d *decoder) value(depth int) ([]byte, error) {
	d.ws()
	start := d.i
	if err := d.skip(depth); err != nil {
		return nil, err
	}
	return d.b[start:d.i], nil
}

// skip checks one JSON value and moves past it.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return d.fail("nested deeper than " + strconv.Itoa(maxDepth))
	}
	switch c := d.peek(); c {
	case '{':
		d.i++
		if d.peek() == '}' {
			d.i++
			return nil
		}
		for {
			if d.peek() != '"' {
				return d.fail("want a string key")
			}
			if err := d.skipString(); err != nil {
				return err
			}
			if d.peek() != ':' {
				return d.fail("want ':'")
			}
			d.i++
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
			case '}':
				d.i++
				return nil
			default:
				return d.fail("want ',' or '}'")
			}
		}
	case '[':
		d.i++
		if d.peek() == ']' {
			d.i++
			return nil
		}
		for {
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			switch d.peek() {
			case ',':
				d.i++
			case ']':
				d.i++
				return nil
			default:
				return d.fail("want ',' or ']'")
			}
		}
	case '"':
		return d.skipString()
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	case 0:
		return d.fail("unexpected end of input")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.number()
		}
		return d.fail("unexpected " + strconv.QuoteRune(rune(c)))
	}
}

func (d *decoder) literal(lit string) error {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return d.fail("want " + lit)
	}
	d.i += len(lit)
	return nil
}

// number checks a number against the JSON grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (d *decoder) number() error {
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case digits() == 0:
		return d.fail("malformed number")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return d.fail("malformed number")
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return d.fail("malformed number")
		}
	}
	return nil
}

// skipString checks a string starting at the current '"' and moves past it.
func (d *decoder) skipString() error {
	_, err := d.scanString()
	return err
}

// scanString is skipString that also reports whether the string has
// escapes: one without can be used in place, undecoded.
func (d *decoder) scanString() (escaped bool, err error) {
	d.i++ // opening quote
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			if d.i+1 >= len(d.b) {
				return escaped, d.fail("unterminated escape")
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.b) {
					return escaped, d.fail("short \\u escape")
				}
				for _, h := range d.b[d.i+2 : d.i+6] {
					if !isHex(h) {
						return escaped, d.fail("bad \\u escape")
					}
				}
				d.i += 6
			default:
				return escaped, d.fail("bad escape")
			}
		case c < 0x20:
			return escaped, d.fail("control character in string")
		default:
			d.i++
		}
	}
	return escaped, d.fail("unterminated string")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// str decodes a string value (or null, as "").
func (d *decoder) str() (string, error) {
	switch d.peek() {
	case 'n':
		return "", d.literal("null")
	case '"':
	default:
		return "", d.fail("want a string")
	}
	start := d.i
	escaped, err := d.scanString()
	if err != nil {
		return "", err
	}
	raw := d.b[start:d.i]
	if !escaped {
		return string(raw[1 : len(raw)-1]), nil
	}
	return unescape(raw[1 : len(raw)-1]), nil
}

// unescape decodes the body of a string scanString accepted, as
// encoding/json does: a lone or mismatched surrogate and invalid UTF-8
// become U+FFFD.
func unescape(s []byte) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			switch e := s[i+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(s[i+2:i+6])); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // '"', '\\', '/'
				b = append(b, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, r)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return string(b)
}

// hex4 decodes four hex digits scanString checked.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// integer decodes an integer value (or null, as 0) as encoding/json decodes
// one into an int: no fraction, no exponent, within range.
func (d *decoder) integer() (int, error) {
	switch c := d.peek(); {
	case c == 'n':
		return 0, d.literal("null")
	case c != '-' && (c < '0' || c > '9'):
		return 0, d.fail("want an integer")
	}
	start := d.i
	if err := d.number(); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, strconv.IntSize)
	if err != nil {
		d.i = start
		return 0, d.fail("want an integer")
	}
	return int(n), nil
}

// object calls field for each member of an object (or nothing for null);
// field must consume the member's value.
func (d *decoder) object(field func(key string) error) error {
	switch d.peek() {
	case 'n':
		return d.literal("null")
	case '{':
	default:
		return d.fail("want an object")
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.fail("want a string key")
		}
		key, err := d.str()
		if err != nil {
			return err
		}
		if d.peek() != ':' {
			return d.fail("want ':'")
		}
		d.i++
		if err := field(key); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return d.fail("want ',' or '}'")
		}
	}
}

// rawField decodes a value kept as bytes; null is absent, as with
// encoding/json and json.RawMessage fields that are omitted when empty.
func (d *decoder) rawField() (json.RawMessage, error) {
	v, err := d.value(1)
	if err != nil || string(v) == "null" {
		return nil, err
	}
	return v, nil
}

// messages decodes an array of messages, each kept as its exact bytes and
// required to be an object.
func (d *decoder) messages(field string) ([]json.RawMessage, error) {
	switch d.peek() {
	case 'n':
		return nil, d.literal("null")
	case '[':
	default:
		return nil, d.fail(field + ": want an array")
	}
	d.i++
	msgs := []json.RawMessage{}
	if d.peek() == ']' {
		d.i++
		return msgs, nil
	}
	for {
		if d.peek() != '{' {
			return nil, d.fail(field + "[" + strconv.Itoa(len(msgs)) + "] is not a JSON object")
		}
		m, err := d.value(1)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return msgs, nil
		default:
			return nil, d.fail("want ',' or ']'")
		}
	}
}

func (d *decoder) facts(f *abi.SessionFacts) error {
	return d.object(func(key string) (err error) {
		switch key {
		case "session_id":
			f.SessionID, err = d.str()
		case "state_key":
			f.StateKey, err = d.str()
		case "service_session_id":
			f.ServiceSessionID, err = d.str()
		default:
			err = d.skip(1)
		}
		return err
	})
}

// envelope decodes the fields provide and store requests share; other
// fields go to more, which must consume them.
func (d *decoder) envelope(state, config *json.RawMessage, facts *abi.SessionFacts, more func(key string) error) error {
	if d.peek() != '{' {
		return d.fail("the request is not a JSON object")
	}
	err := d.object(func(key string) (err error) {
		switch key {
		case "state":
			*state, err = d.rawField()
		case "config":
			*config, err = d.rawField()
		case "session":
			err = d.facts(facts)
		default:
			err = more(key)
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.ws(); d.i != len(d.b) {
		return d.fail("data after the request")
	}
	return nil
}

func decodeProvideRequest(b []byte, req *abi.ProvideRequest) error {
	d := decoder{b: b}
	return d.envelope(&req.State, &req.Config, &req.Session, func(key string) (err error) {
		if key == "request_messages" {
			req.RequestMessages, err = d.messages(key)
			return err
		}
		return d.skip(1)
	})
}

func decodeStoreRequest(b []byte, req *abi.StoreRequest) error {
	d := decoder{b: b}
	return d.envelope(&req.State, &req.Config, &req.Session, func(key string) (err error) {
		switch key {
		case "request_messages":
			req.RequestMessages, err = d.messages(key)
		case "response_messages":
			req.ResponseMessages, err = d.messages(key)
		default:
			err = d.skip(1)
		}
		return err
	})
}

func decodeListRequest(b []byte, req *abi.ListRequest) error {
	d := decoder{b: b}
	return d.envelope(&req.State, &req.Config, &req.Session, func(key string) (err error) {
		switch key {
		case "cursor":
			req.Cursor, err = d.str()
		case "limit":
			req.Limit, err = d.integer()
		default:
			err = d.skip(1)
		}
		return err
	})
}

func decodeClearRequest(b []byte, req *abi.ClearRequest) error {
	d := decoder{b: b}
	return d.envelope(&req.State, &req.Config, &req.Session, func(key string) error { return d.skip(1) })
}

func decodeMigrateStateRequest(b []byte, req *abi.MigrateStateRequest) error {
	d := decoder{b: b}
	if d.peek() != '{' {
		return d.fail("the request is not a JSON object")
	}
	err := d.object(func(key string) (err error) {
		switch key {
		case "from_version":
			req.FromVersion, err = d.integer()
		case "state":
			req.State, err = d.rawField()
		case "config":
			req.Config, err = d.rawField()
		default:
			err = d.skip(1)
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.ws(); d.i != len(d.b) {
		return d.fail("data after the request")
	}
	return nil
}

// checkDescribeRequest accepts what describe may be sent: nothing, null or
// an object, whose members it ignores.
func checkDescribeRequest(b []byte) error {
	d := decoder{b: b}
	if d.ws(); d.i == len(d.b) {
		return nil
	}
	if err := d.object(func(string) error { return d.skip(1) }); err != nil {
		return err
	}
	if d.ws(); d.i != len(d.b) {
		return d.fail("data after the request")
	}
	return nil
}

// encoder appends JSON. Raw values (messages, states) are copied as they
// are: they are the bytes the host sent, or the provider's own, and the host
// validates whatever comes back.
type encoder struct {
	b     []byte
	comma bool
}

func (e *encoder) key(k string) {
	if e.comma {
		e.b = append(e.b, ',')
	}
	e.comma = true
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':')
}

func (e *encoder) raw(v json.RawMessage) {
	if len(v) == 0 {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, v...)
}

func (e *encoder) rawArray(vs []json.RawMessage) {
	e.b = append(e.b, '[')
	for i, v := range vs {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.raw(v)
	}
	e.b = append(e.b, ']')
}

// str appends a JSON string as encoding/json would, HTML characters apart.
func (e *encoder) str(s string) {
	const hex = "0123456789abcdef"
	e.b = append(e.b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			e.b = append(e.b, '\\', c)
			i++
		case c < 0x20:
			switch c {
			case '\n':
				e.b = append(e.b, '\\', 'n')
			case '\r':
				e.b = append(e.b, '\\', 'r')
			case '\t':
				e.b = append(e.b, '\\', 't')
			case '\b':
				e.b = append(e.b, '\\', 'b')
			case '\f':
				e.b = append(e.b, '\\', 'f')
			default:
				e.b = append(e.b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
		case c < utf8.RuneSelf:
			e.b = append(e.b, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				e.b = append(e.b, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				// Valid JSON unescaped, but not valid JavaScript.
				e.b = append(e.b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			default:
				e.b = append(e.b, s[i:i+size]...)
			}
			i += size
		}
	}
	e.b = append(e.b, '"')
}

func (e *encoder) stateChange(c *abi.StateChange) {
	if len(c.State) > 0 {
		e.key("state")
		e.raw(c.State)
	}
	if len(c.Patch) > 0 {
		e.key("state_patch")
		e.b = append(e.b, '[')
		for i := range c.Patch {
			op := &c.Patch[i]
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.b = append(e.b, `{"op":`...)
			e.str(op.Op)
			e.b = append(e.b, `,"path":`...)
			e.str(op.Path)
			if len(op.Value) > 0 {
				e.b = append(e.b, `,"value":`...)
				e.raw(op.Value)
			}
			e.b = append(e.b, '}')
		}
		e.b = append(e.b, ']')
	}
}

// size estimates the encoded size so the response is built in one buffer.
func changeSize(c *abi.StateChange) int {
	n := len(c.State) + 32
	for _, op := range c.Patch {
		n += len(op.Value) + len(op.Path) + 32
	}
	return n
}

func encodeProvideResponse(r *abi.ProvideResponse) []byte {
	n := changeSize(&r.StateChange) + 64
	for _, m := range r.Messages {
		n += len(m) + 1
	}
	e := encoder{b: make([]byte, 0, n)}
	e.b = append(e.b, '{')
	if len(r.Messages) > 0 {
		e.key("messages")
		e.rawArray(r.Messages)
	}
	if s := r.FromState; s != nil {
		e.key("from_state")
		e.b = append(e.b, `{"pointer":`...)
		e.str(s.Pointer)
		if w := s.Window; w != nil {
			e.b = append(e.b, `,"window":{`...)
			inner := encoder{b: e.b}
			if w.MaxMessages != 0 {
				inner.key("max_messages")
				inner.b = strconv.AppendInt(inner.b, int64(w.MaxMessages), 10)
			}
			if w.MaxTokens != 0 {
				inner.key("max_tokens")
				inner.b = strconv.AppendInt(inner.b, int64(w.MaxTokens), 10)
			}
			e.b = append(inner.b, '}')
		}
		e.b = append(e.b, '}')
	}
	e.stateChange(&r.StateChange)
	return append(e.b, '}')
}

func encodeStoreResponse(r *abi.StoreResponse) []byte {
	e := encoder{b: make([]byte, 0, changeSize(&r.StateChange)+2)}
	e.b = append(e.b, '{')
	e.stateChange(&r.StateChange)
	return append(e.b, '}')
}

func encodeListResponse(r *abi.ListResponse) []byte {
	n := len(r.NextCursor) + 48
	for _, m := range r.Messages {
		n += len(m) + 1
	}
	e := encoder{b: make([]byte, 0, n)}
	e.b = append(e.b, '{')
	e.key("messages")
	if r.Messages == nil {
		e.b = append(e.b, "null"...)
	} else {
		e.rawArray(r.Messages)
	}
	if r.NextCursor != "" {
		e.key("next_cursor")
		e.str(r.NextCursor)
	}
	return append(e.b, '}')
}

func encodeMigrateStateResponse(r *abi.MigrateStateResponse) []byte {
	e := encoder{b: make([]byte, 0, len(r.State)+16)}
	e.b = append(e.b, '{')
	e.key("state")
	e.raw(r.State)
	return append(e.b, '}')
}

// encodePluginInfo encodes describe's answer as encoding/json would, apart
// from HTML characters, and from raw values, which are copied as they are.
func encodePluginInfo(p *abi.PluginInfo) []byte {
	e := encoder{b: make([]byte, 0, len(p.StateSchema)+len(p.InitialState)+len(p.ConfigSchema)+256)}
	e.b = append(e.b, '{')
	e.key("name")
	e.str(p.Name)
	e.key("version")
	e.str(p.Version)
	e.key("abi")
	e.str(p.ABI)
	e.key("state_version")
	e.b = strconv.AppendInt(e.b, int64(p.StateVersion), 10)
	e.key("state_schema")
	e.raw(p.StateSchema)
	if len(p.InitialState) > 0 {
		e.key("initial_state")
		e.raw(p.InitialState)
	}
	if len(p.ConfigSchema) > 0 {
		e.key("config_schema")
		e.raw(p.ConfigSchema)
	}
	if len(p.Capabilities) > 0 {
		e.key("capabilities")
		e.b = append(e.b, '[')
		for i, c := range p.Capabilities {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.str(string(c))
		}
		e.b = append(e.b, ']')
	}
	if len(p.OmitState) > 0 {
		e.key("omit_state")
		e.b = append(e.b, '[')
		for i, x := range p.OmitState {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.str(x)
		}
		e.b = append(e.b, ']')
	}
	return append(e.b, '}')
}

// encodeError encodes an error for error_set.
func encodeError(a *abi.Error) []byte {
	e := encoder{b: make([]byte, 0, len(a.Code)+len(a.Message)+32)}
	e.b = append(e.b, '{')
	e.key("code")
	e.str(string(a.Code))
	e.key("message")
	e.str(a.Message)
	return append(e.b, '}')
}
