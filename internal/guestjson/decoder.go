package guestjson

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the most arrays and objects a document may have open at any
// point (`[[1]]` has two open around the 1); a Decoder refuses to open
// more. Decoding recurses once per level and a guest's memory, goroutine
// stacks included, is capped by the host (32 MiB by default), so without a
// bound a request of a few megabytes of '[' would trap the instance instead
// of being refused. Messages nest a handful of levels and plugin states a
// few more; encoding/json allows 10000.
const MaxDepth = 1000

// ErrSyntax is matched (errors.Is) by every error a Decoder returns.
var ErrSyntax = errors.New("malformed JSON")

// SyntaxError is a document a Decoder refused: malformed JSON, nesting
// deeper than MaxDepth, or a value of a kind the caller did not ask for.
type SyntaxError struct {
	Offset int    // byte offset in the document where decoding stopped
	Msg    string // what was found wrong there
}

// Error concatenates rather than formats, so that package fmt stays out of
// the guest.
func (e *SyntaxError) Error() string {
	return ErrSyntax.Error() + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// Unwrap makes errors.Is(err, ErrSyntax) true.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Decoder reads one JSON document front to back. Its methods each consume
// one value (or, Peek and End, white space only); a caller walks a document
// by calling them in the order its values come. After an error the
// position is unspecified: stop there.
type Decoder struct {
	b     []byte
	i     int // next byte to read
	depth int // arrays and objects open at i
}

// NewDecoder returns a Decoder reading doc. Slices it returns alias doc.
func NewDecoder(doc []byte) Decoder { return Decoder{b: doc} }

// Offset is the position of the next byte to read.
func (d *Decoder) Offset() int { return d.i }

// Fail returns a *SyntaxError at the current offset, for a value the caller
// refuses (a string where it wants an object, say).
func (d *Decoder) Fail(msg string) error { return &SyntaxError{Offset: d.i, Msg: msg} }

// Members records which members of one object a one-pass decoder has
// taken, one bit each, for decoders that take each member at most once.
type Members uint64

// Take marks member bit (a power of two) taken and reports whether it had
// not been, and d's next value starts with the byte want (0: any value).
func (m *Members) Take(d *Decoder, bit Members, want byte) bool {
	if *m&bit != 0 || (want != 0 && d.Peek() != want) {
		return false
	}
	*m |= bit
	return true
}

// Peek skips white space and returns the next byte without consuming it,
// or 0 at the end of the document.
func (d *Decoder) Peek() byte {
	b, i := d.b, d.i
	for ; i < len(b); i++ {
		switch c := b[i]; c {
		case ' ', '\t', '\n', '\r':
		default:
			d.i = i
			return c
		}
	}
	d.i = i
	return 0
}

// End checks that nothing but white space follows the document's value.
func (d *Decoder) End() error {
	if d.Peek(); d.i != len(d.b) {
		return d.Fail("data after the document")
	}
	return nil
}

// Skip checks the next value and moves past it.
func (d *Decoder) Skip() error {
	switch c := d.Peek(); c {
	case '"':
		_, err := d.scanString()
		return err
	case '{', '[':
		return d.skipContainer()
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.number()
		}
		if d.i == len(d.b) {
			return d.Fail("unexpected end of input")
		}
		return d.Fail("unexpected " + strconv.QuoteRune(rune(c)))
	}
}

// ReadValue checks the next value and returns its exact bytes, white space
// inside it included; appending to the result cannot overwrite the document.
func (d *Decoder) ReadValue() ([]byte, error) {
	c := d.Peek()
	start := d.i
	// Messages and states, the values most often read whole, are objects:
	// straight into skipContainer, one call fewer than through Skip.
	var err error
	if c == '{' || c == '[' {
		err = d.skipContainer()
	} else {
		err = d.Skip()
	}
	if err != nil {
		return nil, err
	}
	return d.b[start:d.i:d.i], nil
}

// SkipIf moves past the next value and reports true when that value is
// exactly value; otherwise it consumes only white space and reports false.
// It compares bytes and checks nothing else, so value must be bytes that
// ReadValue (or a read between two Offsets) returned for a whole value at
// the same depth, such as the same member of an earlier document: a caller
// that expects a value it has read before moves past it for the cost of a
// comparison.
func (d *Decoder) SkipIf(value []byte) bool {
	d.Peek()
	if len(value) == 0 || !hasPrefix(d.b[d.i:], value) {
		return false
	}
	d.i += len(value)
	return true
}

// hasPrefix is bytes.HasPrefix eight bytes at a time: bytes.Equal is a
// byte-a-turn loop in WebAssembly (about 22 instructions a byte once
// compiled), where a word costs about as much as a byte.
func hasPrefix(b, p []byte) bool {
	n := len(p)
	if len(b) < n {
		return false
	}
	if n < 8 {
		return string(b[:n]) == string(p)
	}
	for i := 0; i+8 < n; i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != binary.LittleEndian.Uint64(p[i:]) {
			return false
		}
	}
	// The last eight bytes, which may overlap the words before them.
	return binary.LittleEndian.Uint64(b[n-8:]) == binary.LittleEndian.Uint64(p[n-8:])
}

// ReadNull consumes a null.
func (d *Decoder) ReadNull() error {
	d.Peek()
	return d.literal("null")
}

// ReadString decodes a string as encoding/json does: escapes resolved, a
// lone surrogate or invalid UTF-8 replaced by U+FFFD. null reads as "", as
// it leaves a string field unset with encoding/json.
func (d *Decoder) ReadString() (string, error) { return d.ReadStringAs("") }

// ReadStringAs is ReadString, but returns like itself, allocating nothing,
// when the string decodes to the same text: a caller that expects the
// value it read last time (a session id, say) passes that.
func (d *Decoder) ReadStringAs(like string) (string, error) {
	switch d.Peek() {
	case '"':
	case 'n':
		return "", d.literal("null")
	default:
		return "", d.Fail("want a string")
	}
	if end := plainEnd(d.b, d.i+1); end >= 0 {
		s := d.b[d.i+1 : end]
		d.i = end + 1
		if string(s) == like {
			return like, nil
		}
		return string(s), nil
	}
	s, err := d.stringBody()
	if err == nil && string(s) == like {
		return like, nil
	}
	return string(s), err
}

// ReadInt decodes an integer as encoding/json decodes one into an int: no
// fraction, no exponent, within range. null reads as 0.
func (d *Decoder) ReadInt() (int, error) {
	n, err := d.readInt(strconv.IntSize)
	return int(n), err
}

// ReadInt64 is ReadInt for an int64.
func (d *Decoder) ReadInt64() (int64, error) { return d.readInt(64) }

func (d *Decoder) readInt(bits int) (int64, error) {
	switch c := d.Peek(); {
	case c == 'n':
		return 0, d.literal("null")
	case c != '-' && (c < '0' || c > '9'):
		return 0, d.Fail("want an integer")
	}
	start := d.i
	if err := d.number(); err != nil {
		return 0, err
	}
	n, ok := parseInt(d.b[start:d.i], bits)
	if !ok {
		d.i = start
		return 0, d.Fail("want an integer")
	}
	return n, nil
}

// parseInt decodes -?[0-9]+ within a signed integer of the given size; it
// refuses anything else (a fraction, an exponent, an overflow).
func parseInt(s []byte, bits int) (int64, bool) {
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	limit := uint64(1) << (bits - 1) // the magnitude of the minimum
	if !neg {
		limit--
	}
	var n uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		digit := uint64(c - '0')
		if n > (limit-digit)/10 {
			return 0, false
		}
		n = n*10 + digit
	}
	if neg {
		return -int64(n), true
	}
	return int64(n), true
}

// Object calls member for each member of an object, in document order, with
// its decoded key (escapes resolved); member must consume the member's
// value. null is an object without members. The key aliases the document
// when it holds no escapes, so keep it only as long as the document.
func (d *Decoder) Object(member func(key []byte) error) error {
	switch d.Peek() {
	case '{':
	case 'n':
		return d.literal("null")
	default:
		return d.Fail("want an object")
	}
	err := d.open()
	if err != nil {
		return err
	}
	if d.Peek() == '}' {
		d.close()
		return nil
	}
	for {
		if d.Peek() != '"' {
			return d.Fail("want a string key")
		}
		// A key's first eight bytes are tested here, as skipContainer
		// does: a key of up to seven bytes costs no call.
		var key []byte
		end := -1
		if j := d.i + 1; j+8 <= len(d.b) {
			if m := stopMask(binary.LittleEndian.Uint64(d.b[j:])); m == 0 {
				end = plainEnd(d.b, j+8)
			} else if j += bits.TrailingZeros64(m) >> 3; d.b[j] == '"' {
				end = j
			}
		} else {
			end = plainEnd(d.b, j)
		}
		if end >= 0 {
			key, d.i = d.b[d.i+1:end:end], end+1
		} else if key, err = d.stringBody(); err != nil {
			return err
		}
		if d.Peek() != ':' {
			return d.Fail("want ':'")
		}
		d.i++
		if err := member(key); err != nil {
			return err
		}
		switch d.Peek() {
		case ',':
			d.i++
		case '}':
			d.close()
			return nil
		default:
			return d.Fail("want ',' or '}'")
		}
	}
}

// Array calls elem for each element of an array, in order; elem must
// consume the element. null is an array without elements.
func (d *Decoder) Array(elem func() error) error {
	switch d.Peek() {
	case '[':
	case 'n':
		return d.literal("null")
	default:
		return d.Fail("want an array")
	}
	if err := d.open(); err != nil {
		return err
	}
	if d.Peek() == ']' {
		d.close()
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch d.Peek() {
		case ',':
			d.i++
		case ']':
			d.close()
			return nil
		default:
			return d.Fail("want ',' or ']'")
		}
	}
}

// open moves past the '{' or '[' at the current offset, within MaxDepth.
func (d *Decoder) open() error {
	if d.depth >= MaxDepth {
		return d.Fail(tooDeep)
	}
	d.depth++
	d.i++
	return nil
}

// close moves past the '}' or ']' at the current offset.
func (d *Decoder) close() {
	d.depth--
	d.i++
}

var tooDeep = "nested deeper than " + strconv.Itoa(MaxDepth)

// skipContainer checks the object or array at the current offset and
// moves past it. It is one loop over the bytes with the open containers
// kept as bits, rather than a call per value: compiled to WebAssembly, a
// Go function call costs as much as scanning dozens of bytes (the caller
// spills what it keeps to the stack and reloads it), and a message is
// mostly short keys and values (SPEC's messages nest a handful of levels).
// Keys are read in the same loop as values, and a string's first sixteen
// bytes are tested in place, eight at a time, so that a key or value of up
// to fifteen bytes (a message's "message_id", "created_at", "assistant")
// costs no call; longer strings go on in plainEnd, and anything rarer (an
// escape, a number) through the same checks Skip uses.
func (d *Decoder) skipContainer() error {
	// objects has bit k set when the k-th container this call opened is
	// an object; depth counts them on top of d.depth.
	var objects [MaxDepth/64 + 1]uint64
	b, i, depth := d.b, d.i, 0
	// key is set when a member's key, and its colon, come before the
	// value at i.
	key := false
	fail := func(at int, msg string) error {
		d.i = at
		return d.Fail(msg)
	}
	for {
		// A value, or a key, starts at i.
		i = space(b, i)
		if i == len(b) {
			if key {
				return fail(i, "want a string key")
			}
			return fail(i, "unexpected end of input")
		}
		c := b[i]
		if key && c != '"' {
			return fail(i, "want a string key")
		}
		switch c {
		case '{', '[':
			if d.depth+depth >= MaxDepth {
				return fail(i, tooDeep)
			}
			if c == '{' {
				objects[depth>>6] |= 1 << (depth & 63)
			} else {
				objects[depth>>6] &^= 1 << (depth & 63)
			}
			depth++
			i = space(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				depth--
				i++
				break
			}
			key = c == '{'
			continue
		case '"':
			end := -1
			if j := i + 1; j+16 <= len(b) {
				if m := stopMask(binary.LittleEndian.Uint64(b[j:])); m != 0 {
					if j += bits.TrailingZeros64(m) >> 3; b[j] == '"' {
						end = j
					}
				} else if m := stopMask(binary.LittleEndian.Uint64(b[j+8:])); m != 0 {
					if j += 8 + bits.TrailingZeros64(m)>>3; b[j] == '"' {
						end = j
					}
				} else {
					end = plainEnd(b, j+16)
				}
			} else {
				end = plainEnd(b, j)
			}
			if end >= 0 {
				i = end + 1
			} else {
				d.i = i
				if _, err := d.scanString(); err != nil {
					return err
				}
				i = d.i
			}
			if key {
				i = space(b, i)
				if i == len(b) || b[i] != ':' {
					return fail(i, "want ':'")
				}
				i++
				key = false
				continue
			}
		case 't', 'f', 'n':
			lit := "null"
			if c == 't' {
				lit = "true"
			} else if c == 'f' {
				lit = "false"
			}
			if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
				return fail(i, "want "+lit)
			}
			i += len(lit)
		default:
			if c != '-' && (c < '0' || c > '9') {
				return fail(i, "unexpected "+strconv.QuoteRune(rune(c)))
			}
			d.i = i
			if err := d.number(); err != nil {
				return err
			}
			i = d.i
		}
		// A value ended at i: close what ends with it.
		for {
			if depth == 0 {
				d.i = i
				return nil
			}
			i = space(b, i)
			object := objects[(depth-1)>>6]&(1<<((depth-1)&63)) != 0
			if i < len(b) && b[i] == ',' {
				i++
				key = object
				break
			}
			if object && i < len(b) && b[i] == '}' || !object && i < len(b) && b[i] == ']' {
				depth--
				i++
				continue
			}
			if object {
				return fail(i, "want ',' or '}'")
			}
			return fail(i, "want ',' or ']'")
		}
	}
}

// space returns the offset of the first byte at or after i that is not
// white space.
func space(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// plainEnd returns the offset of the quote that closes the string whose
// contents start at i, when every byte before it is printable ASCII other
// than a backslash; else -1, and the caller scans the string in full
// (scanString). Keys and most values of a message take this path: the
// first eight bytes, which hold most keys and short values whole, then
// thirty-two bytes a turn, then eight. Compiled to WebAssembly each turn of
// a loop costs a jump through the function's dispatch table, about as much
// as testing two words, so a message's text (hundreds of bytes) is found in
// a quarter of the turns an eight-byte stride takes.
func plainEnd(b []byte, i int) int {
	if i+8 <= len(b) {
		if m := stopMask(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return quoteAt(b, i, m)
		}
		i += 8
	}
	for ; i+32 <= len(b); i += 32 {
		w := b[i : i+32 : i+32]
		m0, m1 := stopMask(binary.LittleEndian.Uint64(w)), stopMask(binary.LittleEndian.Uint64(w[8:]))
		m2, m3 := stopMask(binary.LittleEndian.Uint64(w[16:])), stopMask(binary.LittleEndian.Uint64(w[24:]))
		if m0|m1|m2|m3 != 0 {
			switch {
			case m0 != 0:
				return quoteAt(b, i, m0)
			case m1 != 0:
				return quoteAt(b, i+8, m1)
			case m2 != 0:
				return quoteAt(b, i+16, m2)
			}
			return quoteAt(b, i+24, m3)
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if m := stopMask(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return quoteAt(b, i, m)
		}
	}
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i
		case c < 0x20 || c >= utf8.RuneSelf || c == '\\':
			return -1
		}
	}
	return -1
}

// quoteAt is plainEnd's answer for the word at i whose stopMask is m (not
// zero): the offset of its first byte that is not plain, if that byte is
// the closing quote, else -1.
func quoteAt(b []byte, i int, m uint64) int {
	if j := i + bits.TrailingZeros64(m)>>3; b[j] == '"' {
		return j
	}
	return -1
}

// stopMask has the high bit set of each byte of w that ends a plain run in
// plainEnd (a quote, a backslash, a control character or a byte outside
// ASCII), and possibly of bytes above such a one; its lowest set bit is
// that of the first such byte, and it is zero when there is none. It is
// notPlain with the bytes outside ASCII folded in, in ten operations: a
// byte's subtraction borrows only when the byte is below what is
// subtracted (a control character, or a quote or backslash after the
// xor), and a byte that sets its high bit otherwise is outside ASCII.
func stopMask(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return ((w - ones*0x20) | ((w ^ ones*'"') - ones) | ((w ^ ones*'\\') - ones) | w) & highs
}

// literal moves past lit (true, false or null) at the current offset.
func (d *Decoder) literal(lit string) error {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return d.Fail("want " + lit)
	}
	d.i += len(lit)
	return nil
}

// number moves past a number at the current offset, checking it against
// the grammar -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (d *Decoder) number() error {
	b, i := d.b, d.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		d.i = i
		return d.Fail("malformed number")
	}
	if i < len(b) && b[i] == '.' {
		start := i + 1
		if i = digits(b, start); i == start {
			d.i = i
			return d.Fail("malformed number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		if i = digits(b, start); i == start {
			d.i = i
			return d.Fail("malformed number")
		}
	}
	d.i = i
	return nil
}

// digits returns the offset of the first byte at or after i that is not a
// decimal digit.
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// stringBody moves past the string at the current offset and returns its
// decoded contents: a slice of the document when it needs no decoding (no
// escapes, valid UTF-8), else a new slice.
func (d *Decoder) stringBody() ([]byte, error) {
	start := d.i + 1
	escaped, err := d.scanString()
	if err != nil {
		return nil, err
	}
	body := d.b[start : d.i-1 : d.i-1]
	if !escaped && utf8.Valid(body) {
		return body, nil
	}
	return unescape(body), nil
}

// scanString checks the string whose opening quote is at the current
// offset, moves past it and reports whether it holds escapes.
//
// This loop is where a guest spends most of its JSON time (messages are
// mostly text), hence the copies of d.b and d.i in locals and one table
// lookup per plain byte.
func (d *Decoder) scanString() (escaped bool, err error) {
	b, i := d.b, d.i+1
	for {
		// Thirty-two bytes at a time while none of them ends the run of
		// plain bytes, then eight, then one at a time. Compiled to
		// WebAssembly, every turn of a loop costs a jump through the
		// function's dispatch table, so the wide stride pays for itself.
		for i+32 <= len(b) {
			w := b[i : i+32 : i+32]
			if notPlain(binary.LittleEndian.Uint64(w))|notPlain(binary.LittleEndian.Uint64(w[8:]))|
				notPlain(binary.LittleEndian.Uint64(w[16:]))|notPlain(binary.LittleEndian.Uint64(w[24:])) != 0 {
				break
			}
			i += 32
		}
		for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i == len(b) {
			d.i = i
			return escaped, d.Fail("unterminated string")
		}
		switch b[i] {
		case '"':
			d.i = i + 1
			return escaped, nil
		case '\\':
			escaped = true
			if i+1 == len(b) {
				d.i = i
				return escaped, d.Fail("unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					d.i = i
					return escaped, d.Fail("short \\u escape")
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						d.i = i
						return escaped, d.Fail("bad \\u escape")
					}
				}
				i += 6
			default:
				d.i = i
				return escaped, d.Fail("bad escape")
			}
		default:
			d.i = i
			return escaped, d.Fail("control character in string")
		}
	}
}

// plain[c] is whether byte c stands for itself inside a string: not a
// quote, a backslash or a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainWord reports whether each of the eight bytes of w is plain: no byte
// below 0x20, and none equal to a quote or a backslash. Each test is exact
// for the word as a whole (see "Determine if a word has a byte less than
// n" in Bit Twiddling Hacks): a byte of 0x80 or more never counts.
func plainWord(w uint64) bool { return notPlain(w) == 0 }

// notPlain has the high bit of each byte of w set that is not plain, and
// possibly of bytes above such a one (borrows carry upwards); it is zero
// exactly when every byte is plain.
func notPlain(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	less := func(x uint64, n uint64) uint64 { return (x - ones*n) & ^x & highs }
	return less(w, 0x20) | less(w^(ones*'"'), 1) | less(w^(ones*'\\'), 1)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// Unquote decodes a JSON string literal (white space around it allowed) as
// ReadString does; anything else, null included, is an error.
func Unquote(lit []byte) (string, error) {
	d := NewDecoder(lit)
	if d.Peek() != '"' {
		return "", d.Fail("want a string")
	}
	s, err := d.ReadString()
	if err != nil {
		return "", err
	}
	return s, d.End()
}
