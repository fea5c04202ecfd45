package sdk

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// Every export decodes its request and encodes its response here rather than
// with encoding/json. Compiled to WebAssembly, encoding/json costs about
// 300 µs for a 1 KB store request and its response, ten times what moving
// the bytes through kernel memory costs, because it scans every byte several
// times and works through reflection. This codec makes one validating pass
// over the request with the guest side's shared scanner (internal/guestjson),
// keeps each message as the exact bytes received (never decoding it), and
// writes the response by appending those bytes.
//
// The rarer exports use it too, and nothing on the guest's paths formats
// with fmt: a plugin that links neither encoding/json's codec nor fmt is
// about 1.4 MB smaller, and the host reads and compiles the whole module
// on its first load, and maps and checksums all of its compiled code on
// every load, at a cost proportional to its size.

// rawField decodes a value kept as bytes; null is absent, as with
// encoding/json and json.RawMessage fields that are omitted when empty.
func rawField(d *guestjson.Decoder) (json.RawMessage, error) {
	v, err := d.ReadValue()
	if err != nil || string(v) == "null" {
		return nil, err
	}
	return v, nil
}

// messages decodes an array of messages, each kept as its exact bytes and
// required to be an object. They are appended to arena, which the arrays of
// one request share so that it allocates once, and returned as the slice of
// arena that holds them (capped, so appending to it cannot overwrite
// another array's).
func messages(d *guestjson.Decoder, field string, arena *[]json.RawMessage) ([]json.RawMessage, error) {
	switch d.Peek() {
	case 'n':
		return nil, d.ReadNull()
	case '[':
	default:
		return nil, d.Fail(field + ": want an array")
	}
	start := len(*arena)
	err := d.Array(func() error {
		if d.Peek() != '{' {
			return d.Fail(field + "[" + strconv.Itoa(len(*arena)-start) + "] is not a JSON object")
		}
		m, err := d.ReadValue()
		*arena = append(*arena, m)
		return err
	})
	if err != nil {
		return nil, err
	}
	if end := len(*arena); end > start {
		return (*arena)[start:end:end], nil
	}
	return []json.RawMessage{}, nil
}

// arenaSize is the messages a request's arena holds before it grows: a
// turn's request and response messages, typically.
const arenaSize = 8

// provideCall and storeCall are what dispatch allocates for a provide or
// a store: the request, which the provider is handed and so lives on the
// heap, and the arena its message lists share, in one object rather than
// two (each allocation costs a WebAssembly guest a few thousand
// instructions). Nothing in them is reused: the provider may keep the
// request and its lists.
type provideCall struct {
	req   abi.ProvideRequest
	arena [2]json.RawMessage
}

type storeCall struct {
	req   abi.StoreRequest
	arena [arenaSize]json.RawMessage
}

// facts decodes the session facts into f and says which of the three
// members the object held (bits 0, 1, 2: session_id, state_key,
// service_session_id). like is what they probably are (the previous
// call's, in a WebAssembly guest): a string that decodes to the guessed
// text is that string, not a new copy.
func facts(d *guestjson.Decoder, f *abi.SessionFacts, like abi.SessionFacts) (has uint8, err error) {
	err = d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "session_id":
			f.SessionID, err = d.ReadStringAs(like.SessionID)
			has |= 1
		case "state_key":
			f.StateKey, err = d.ReadStringAs(like.StateKey)
			has |= 2
		case "service_session_id":
			f.ServiceSessionID, err = d.ReadStringAs(like.ServiceSessionID)
			has |= 4
		default:
			err = d.Skip()
		}
		return err
	})
	return has, err
}

// sessionGuess is what a WebAssembly guest keeps of the last request's
// session member: its exact bytes, what they decoded to and which members
// they held. Every call of a session sends the same member, so a request
// that repeats it byte for byte is moved past with one comparison
// (guestjson.Decoder.SkipIf) instead of decoding an object of two or
// three strings, which costs a guest about five thousand instructions.
type sessionGuess struct {
	raw   []byte
	facts abi.SessionFacts
	has   uint8
}

// maxSessionGuess bounds the session member a guest keeps: session ids
// are at most 128 bytes, and a pooled instance must not hold on to an
// unusual request's large member.
const maxSessionGuess = 1 << 10

// session decodes the session member at d's offset in doc into *sf,
// merging its members into what *sf holds as encoding/json merges a
// repeated member. g, nil for a native Handler, is the guess to try and
// then to update.
func session(d *guestjson.Decoder, doc []byte, sf *abi.SessionFacts, g *sessionGuess) error {
	if g == nil {
		_, err := facts(d, sf, abi.SessionFacts{})
		return err
	}
	if !d.SkipIf(g.raw) {
		start := d.Offset()
		var one abi.SessionFacts
		has, err := facts(d, &one, g.facts)
		if err != nil {
			return err
		}
		if raw := doc[start:d.Offset()]; len(raw) <= maxSessionGuess {
			g.raw, g.facts, g.has = append(g.raw[:0], raw...), one, has
		} else {
			*g = sessionGuess{}
			g.merge(sf, one, has)
			return nil
		}
	}
	g.merge(sf, g.facts, g.has)
	return nil
}

// merge sets the members of *sf that has names to those of f.
func (g *sessionGuess) merge(sf *abi.SessionFacts, f abi.SessionFacts, has uint8) {
	if has&1 != 0 {
		sf.SessionID = f.SessionID
	}
	if has&2 != 0 {
		sf.StateKey = f.StateKey
	}
	if has&4 != 0 {
		sf.ServiceSessionID = f.ServiceSessionID
	}
}

// envelope decodes the fields provide and store requests share from doc;
// other fields go to more, which must consume them. g is the session
// guess (see session), nil for a native Handler.
func envelope(d *guestjson.Decoder, doc []byte, state, config *json.RawMessage, sf *abi.SessionFacts, g *sessionGuess, more func(key []byte) error) error {
	if d.Peek() != '{' {
		return d.Fail("the request is not a JSON object")
	}
	err := d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "state":
			*state, err = rawField(d)
		case "config":
			*config, err = rawField(d)
		case "session":
			err = session(d, doc, sf, g)
		default:
			err = more(key)
		}
		return err
	})
	if err != nil {
		return err
	}
	return d.End()
}

// decodeProvideRequest decodes a provide request into req. Its message
// list is kept in arena (see messages), which may be nil.
func decodeProvideRequest(b []byte, req *abi.ProvideRequest, arena []json.RawMessage, g *sessionGuess) error {
	d := guestjson.NewDecoder(b)
	return envelope(&d, b, &req.State, &req.Config, &req.Session, g, func(key []byte) (err error) {
		if string(key) == "request_messages" {
			req.RequestMessages, err = messages(&d, "request_messages", &arena)
			return err
		}
		return d.Skip()
	})
}

// decodeStoreRequest decodes a store request into req. Its message lists
// share arena (see messages); nil allocates one of arenaSize.
func decodeStoreRequest(b []byte, req *abi.StoreRequest, arena []json.RawMessage, g *sessionGuess) error {
	d := guestjson.NewDecoder(b)
	if arena == nil {
		arena = make([]json.RawMessage, 0, arenaSize)
	}
	return envelope(&d, b, &req.State, &req.Config, &req.Session, g, func(key []byte) (err error) {
		switch string(key) {
		case "request_messages":
			req.RequestMessages, err = messages(&d, "request_messages", &arena)
		case "response_messages":
			req.ResponseMessages, err = messages(&d, "response_messages", &arena)
		default:
			err = d.Skip()
		}
		return err
	})
}

func decodeListRequest(b []byte, req *abi.ListRequest, g *sessionGuess) error {
	d := guestjson.NewDecoder(b)
	return envelope(&d, b, &req.State, &req.Config, &req.Session, g, func(key []byte) (err error) {
		switch string(key) {
		case "cursor":
			req.Cursor, err = d.ReadString()
		case "limit":
			req.Limit, err = d.ReadInt()
		default:
			err = d.Skip()
		}
		return err
	})
}

func decodeClearRequest(b []byte, req *abi.ClearRequest, g *sessionGuess) error {
	d := guestjson.NewDecoder(b)
	return envelope(&d, b, &req.State, &req.Config, &req.Session, g, func([]byte) error { return d.Skip() })
}

func decodeMigrateStateRequest(b []byte, req *abi.MigrateStateRequest) error {
	d := guestjson.NewDecoder(b)
	if d.Peek() != '{' {
		return d.Fail("the request is not a JSON object")
	}
	err := d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "from_version":
			req.FromVersion, err = d.ReadInt()
		case "state":
			req.State, err = rawField(&d)
		case "config":
			req.Config, err = rawField(&d)
		default:
			err = d.Skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	return d.End()
}

// checkDescribeRequest accepts what describe may be sent: nothing, null or
// an object, whose members it ignores.
func checkDescribeRequest(b []byte) error {
	d := guestjson.NewDecoder(b)
	if d.Peek(); d.Offset() == len(b) {
		return nil
	}
	if err := d.Object(func([]byte) error { return d.Skip() }); err != nil {
		return err
	}
	return d.End()
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
	// The strings the SDK writes (patch operations, pointers, names) are
	// nearly always plain ASCII: found eight bytes at a time and copied in
	// one append.
	plain := guestjson.PlainRun(s, 0)
	e.b = append(e.b, s[:plain]...)
	for i := plain; i < len(s); {
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
		// The operations of a store are nearly always adds to one path
		// (sdk.AppendOps): "add" is written as a constant, and a path
		// equal to the previous operation's is copied from what was
		// written for it rather than escaped again.
		var path string
		var at, end int
		for i := range c.Patch {
			op := &c.Patch[i]
			if i > 0 {
				e.b = append(e.b, ',')
			}
			if op.Op == abi.PatchAdd {
				e.b = append(e.b, `{"op":"add","path":`...)
			} else {
				e.b = append(e.b, `{"op":`...)
				e.str(op.Op)
				e.b = append(e.b, `,"path":`...)
			}
			if i > 0 && op.Path == path {
				e.b = append(e.b, e.b[at:end]...)
			} else {
				path, at = op.Path, len(e.b)
				e.str(op.Path)
				end = len(e.b)
			}
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

// buffer returns dst emptied if it holds n bytes, else a new buffer of
// capacity n.
func buffer(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst[:0]
	}
	return make([]byte, 0, n)
}

// encodeProvideResponse appends the response to dst[:0] (or a new buffer,
// if dst is too small).
func encodeProvideResponse(dst []byte, r *abi.ProvideResponse) []byte {
	n := changeSize(&r.StateChange) + 64
	for _, m := range r.Messages {
		n += len(m) + 1
	}
	e := encoder{b: buffer(dst, n)}
	e.b = append(e.b, '{')
	if len(r.Messages) > 0 {
		e.key("messages")
		e.rawArray(r.Messages)
	}
	e.selection(r.FromState)
	e.stateChange(&r.StateChange)
	return append(e.b, '}')
}

// encodeStoreResponse is encodeProvideResponse for a store (or clear)
// response.
func encodeStoreResponse(dst []byte, r *abi.StoreResponse) []byte {
	e := encoder{b: buffer(dst, changeSize(&r.StateChange)+2)}
	e.b = append(e.b, '{')
	e.stateChange(&r.StateChange)
	return append(e.b, '}')
}

// selection adds a from_state member, if s is not nil.
func (e *encoder) selection(s *abi.StateSelection) {
	if s == nil {
		return
	}
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

func encodeListResponse(r *abi.ListResponse) []byte {
	n := len(r.NextCursor) + 48
	if r.FromState != nil {
		n += len(r.FromState.Pointer) + 64
	}
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
	e.selection(r.FromState)
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
