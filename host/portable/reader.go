package portable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/host/session"
)

// Limits bound what a Reader holds at once. The zero value gives the
// defaults.
type Limits struct {
	// MaxMessageBytes bounds one message (and any other value in a slot or
	// an unknown member). Default 8 MiB, the host's default bound on a
	// plugin's output, so no page a plugin returned holds a larger one.
	MaxMessageBytes int64
	// MaxSessionBytes bounds the session member. Default 16 MiB.
	MaxSessionBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = 8 << 20
	}
	if l.MaxSessionBytes <= 0 {
		l.MaxSessionBytes = 16 << 20
	}
	return l
}

var errTooLarge = errors.New("value larger than the limit")

// window is the Reader's source: it refuses to give the JSON decoder
// more than limit bytes in all, so the decoder's buffer, which holds the
// value being decoded, never grows past the limit the Reader set for that
// value.
type window struct {
	r           io.Reader
	read, limit int64
	// peak is the largest number of bytes read ahead of the decoder.
	peak int64
	// at reports how far the decoder has consumed, to compute peak.
	at func() int64
}

func (w *window) Read(p []byte) (int, error) {
	room := w.limit - w.read
	if room <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := w.r.Read(p)
	w.read += int64(n)
	if ahead := w.read - w.at(); ahead > w.peak {
		w.peak = ahead
	}
	return n, err
}

// Reader reads one portable document. NewReader reads up to the slots;
// Slots then yields each slot, and each slot's Messages (or Pages) its
// history, one message at a time. A Reader holds at most one message (and
// the session) however long the history is.
//
// An import commits only after the Slots loop ended without error: the
// last step checks the document's totals and that nothing follows it, so
// a document cut short, even at a message boundary and closed again, is
// refused there.
type Reader struct {
	// ctx bounds the checks of what the Reader reads (NewReaderContext).
	ctx   context.Context
	dec   *json.Decoder
	win   *window
	lim   Limits
	ver   string
	sess  *session.Session
	state readState

	slotIdx int
	slot    Slot
	msgIdx  int
	total   int64
	keys    map[string]bool
	started bool
	err     error
}

type readState int

const (
	betweenSlots readState = iota
	inMessages
	done
)

// NewReader is NewReaderContext with a context that never ends.
func NewReader(src io.Reader, lim Limits) (*Reader, error) {
	return NewReaderContext(context.Background(), src, lim)
}

// NewReaderContext reads the start of a document from src: its format
// version and session. src is read as needed, never closed. ctx bounds
// the Reader's checks of what it reads (a message can take seconds to
// check against schemas/message.json): once ctx is done, the read under
// way, and every later one, fails with ctx's cause, located, and never
// as a fault of the document.
func NewReaderContext(ctx context.Context, src io.Reader, lim Limits) (*Reader, error) {
	r := newReader(ctx, src, lim)
	r.keys = map[string]bool{}
	if err := r.readHead(); err != nil {
		return nil, r.fail(err)
	}
	return r, nil
}

// newReader is a Reader of src before it read anything.
func newReader(ctx context.Context, src io.Reader, lim Limits) *Reader {
	r := &Reader{ctx: ctx, lim: lim.withDefaults(), slotIdx: -1, msgIdx: -1}
	r.win = &window{r: src}
	r.dec = json.NewDecoder(r.win)
	r.dec.UseNumber()
	r.win.at = r.dec.InputOffset
	return r
}

// validate checks raw against s under the Reader's context; invalid says
// what a failure means. Once the context is done the check fails with the
// context's cause instead: the document was not found wrong.
func (r *Reader) validate(s *schema.Schema, raw []byte, invalid func(error) error) error {
	if cause := context.Cause(r.ctx); cause != nil {
		return cause
	}
	err := s.ValidateCounted(r.ctx, raw)
	if err == nil {
		return nil
	}
	if cause := context.Cause(r.ctx); cause != nil {
		return cause
	}
	return invalid(err)
}

// FormatVersion is the document's format_version.
func (r *Reader) FormatVersion() string { return r.ver }

// Session returns the document's session, checked as session.Decode
// checks one, without State: an import rebuilds each slot's state from
// its history.
func (r *Reader) Session() *session.Session { return r.sess.Clone() }

// arm lets the decoder read at most max bytes past what it has consumed.
func (r *Reader) arm(max int64) { r.win.limit = r.dec.InputOffset() + max }

func (r *Reader) token() (json.Token, error) {
	r.arm(r.lim.MaxMessageBytes)
	return r.dec.Token()
}

// value reads the next value whole, at most max bytes of it.
func (r *Reader) value(max int64) (json.RawMessage, error) {
	r.arm(max)
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		return nil, err
	}
	if int64(len(raw)) > max {
		// Already buffered under an earlier, larger limit.
		return nil, errTooLarge
	}
	return raw, nil
}

// key reads the next member name of an object, or end at its '}'.
func (r *Reader) key() (name string, end bool, err error) {
	tok, err := r.token()
	if err != nil {
		return "", false, err
	}
	switch t := tok.(type) {
	case json.Delim:
		return "", true, nil // the decoder allows only '}' here
	case string:
		return t, false, nil
	}
	return "", false, fmt.Errorf("%w: expected a member name", ErrMalformed)
}

func (r *Reader) delim(want json.Delim, what string) error {
	tok, err := r.token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("%w: %s is not %s", ErrMalformed, what, kind(want))
	}
	return nil
}

func kind(d json.Delim) string {
	if d == '[' {
		return "an array"
	}
	return "an object"
}

func (r *Reader) readHead() error {
	tok, err := r.token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
	case json.Delim('['):
		return fmt.Errorf("%w: an array, not a portable document (a Chat Completions messages array is read by ReadOpenAI)", ErrMalformed)
	default:
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	name, end, err := r.key()
	switch {
	case err != nil:
		return err
	case end:
		return fmt.Errorf("%w: empty object, %s missing", ErrMalformed, memberVersion)
	case name == "schema_version":
		return fmt.Errorf("%w: %w", ErrMalformed, errSessionFile)
	case name != memberVersion:
		return fmt.Errorf("%w: the first member is %q, not %s", ErrMalformed, name, memberVersion)
	}
	raw, err := r.value(r.lim.MaxMessageBytes)
	if err != nil {
		return err
	}
	if json.Unmarshal(raw, &r.ver) != nil {
		return fmt.Errorf("%w: %s is not a string", ErrMalformed, memberVersion)
	}
	if err := checkVersion(r.ver); err != nil {
		return err
	}
	for {
		name, end, err := r.key()
		if err != nil {
			return err
		}
		if end {
			if r.sess == nil {
				return fmt.Errorf("%w: %s missing", ErrMalformed, memberSession)
			}
			return fmt.Errorf("%w: %s missing", ErrMalformed, memberSlots)
		}
		switch name {
		case memberVersion:
			return fmt.Errorf("%w: %s twice", ErrMalformed, name)
		case memberSession:
			if r.sess != nil {
				return fmt.Errorf("%w: %s twice", ErrMalformed, name)
			}
			if err := r.readSession(); err != nil {
				return err
			}
		case memberSlots:
			if r.sess == nil {
				return fmt.Errorf("%w: %s before %s", ErrMalformed, memberSlots, memberSession)
			}
			return r.delim('[', memberSlots)
		case memberTotals:
			return fmt.Errorf("%w: %s before %s", ErrMalformed, memberTotals, memberSlots)
		default:
			if _, err := r.value(r.lim.MaxMessageBytes); err != nil {
				return err
			}
		}
	}
}

func (r *Reader) readSession() error {
	raw, err := r.value(r.lim.MaxSessionBytes)
	if err != nil {
		return err
	}
	if err := r.validate(sessionSchema(), raw, func(err error) error {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, memberSession, err)
	}); err != nil {
		return err
	}
	var d docSession
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, memberSession, err)
	}
	s, err := d.toSession()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, memberSession, err)
	}
	r.sess = s
	return nil
}

// fail records err, located where the Reader is, as the Reader's error.
func (r *Reader) fail(err error) error {
	if r.err != nil {
		return r.err
	}
	e := &Error{Slot: r.slot.Key, SlotIndex: r.slotIdx, Message: r.msgIdx, Offset: r.dec.InputOffset()}
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		e.Err = ErrTruncated
	case errors.Is(err, errTooLarge):
		e.Err = fmt.Errorf("%w: more than %d bytes (message) or %d bytes (session)", ErrTooLarge, r.lim.MaxMessageBytes, r.lim.MaxSessionBytes)
	case errors.As(err, &se):
		e.Err, e.Offset = fmt.Errorf("%w: %w", ErrMalformed, err), se.Offset
	case isOurs(err):
		e.Err = err
	case r.ctx.Err() != nil && (errors.Is(err, context.Cause(r.ctx)) || errors.Is(err, r.ctx.Err())):
		e.Err = fmt.Errorf("portable: reading stopped: %w", err)
	default:
		e.Err = fmt.Errorf("portable: reading: %w", err)
	}
	r.err = e
	r.state = done
	return e
}

func isOurs(err error) bool {
	for _, s := range []error{ErrMalformed, ErrVersion, ErrInvalidMessage, ErrTruncated, ErrTooLarge, ErrConvert} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// Slots yields each slot of the document in order. The loop ends without
// error only when the whole document was read and checked; a slot whose
// messages the caller did not read is read (and checked) before the next
// one. Slots can be ranged over once.
func (r *Reader) Slots() iter.Seq2[*SlotReader, error] {
	return func(yield func(*SlotReader, error) bool) {
		if r.err != nil {
			yield(nil, r.err)
			return
		}
		if r.started {
			yield(nil, errors.New("portable: Slots ranged over twice"))
			return
		}
		r.started = true
		for {
			sr, err := r.nextSlot()
			if err != nil {
				yield(nil, r.fail(err))
				return
			}
			if sr == nil || !yield(sr, nil) {
				return
			}
		}
	}
}

// nextSlot moves to the next slot; nil at the end of the document.
func (r *Reader) nextSlot() (*SlotReader, error) {
	if r.err != nil {
		return nil, r.err
	}
	for r.state == inMessages {
		if _, _, err := r.nextMessage(); err != nil {
			return nil, err
		}
	}
	if r.state == done {
		return nil, nil
	}
	tok, err := r.token()
	if err != nil {
		return nil, err
	}
	if tok == json.Delim(']') {
		if err := r.readTail(); err != nil {
			return nil, err
		}
		r.state = done
		return nil, nil
	}
	r.slotIdx++
	r.slot, r.msgIdx = Slot{}, -1
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("%w: a slot is not an object", ErrMalformed)
	}
	seen := map[string]bool{}
	for {
		name, end, err := r.key()
		if err != nil {
			return nil, err
		}
		if end {
			return nil, fmt.Errorf("%w: slot without %s", ErrMalformed, memberMessages)
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: %s twice in a slot", ErrMalformed, name)
		}
		seen[name] = true
		switch name {
		case memberKey, memberPlugin, memberPVersion:
			raw, err := r.value(r.lim.MaxMessageBytes)
			if err != nil {
				return nil, err
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return nil, fmt.Errorf("%w: slot %s is not a string", ErrMalformed, name)
			}
			switch name {
			case memberKey:
				r.slot.Key = s
			case memberPlugin:
				r.slot.Plugin = s
			default:
				r.slot.PluginVersion = s
			}
		case memberMessages:
			switch {
			case r.slot.Key == "" || r.slot.Plugin == "":
				return nil, fmt.Errorf("%w: a slot's %s and %s (non-empty) come before its %s", ErrMalformed, memberKey, memberPlugin, memberMessages)
			case r.keys[r.slot.Key]:
				return nil, fmt.Errorf("%w: slot %q twice", ErrMalformed, r.slot.Key)
			}
			r.keys[r.slot.Key] = true
			if err := r.delim('[', memberMessages); err != nil {
				return nil, err
			}
			r.state = inMessages
			return &SlotReader{Slot: r.slot, r: r, idx: r.slotIdx}, nil
		default:
			if _, err := r.value(r.lim.MaxMessageBytes); err != nil {
				return nil, err
			}
		}
	}
}

// nextMessage reads the current slot's next message; ok is false at the
// end of its history, after which the Reader is between slots.
func (r *Reader) nextMessage() (m abi.Message, ok bool, err error) {
	r.arm(r.lim.MaxMessageBytes)
	if !r.dec.More() {
		if err := r.delim(']', memberMessages); err != nil {
			return m, false, err
		}
		r.msgIdx = -1
		if err := r.endSlot(); err != nil {
			return m, false, err
		}
		r.state = betweenSlots
		return m, false, nil
	}
	r.msgIdx++
	raw, err := r.value(r.lim.MaxMessageBytes)
	if err != nil {
		return m, false, err
	}
	if err := r.validate(messageSchema(), raw, func(err error) error {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}); err != nil {
		return m, false, err
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, false, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	r.total++
	return m, true, nil
}

// endSlot reads what follows a slot's messages: members this version
// does not know, then the slot's end.
func (r *Reader) endSlot() error {
	for {
		name, end, err := r.key()
		if err != nil || end {
			return err
		}
		switch name {
		case memberKey, memberPlugin, memberPVersion, memberMessages:
			return fmt.Errorf("%w: %s after a slot's %s", ErrMalformed, name, memberMessages)
		}
		if _, err := r.value(r.lim.MaxMessageBytes); err != nil {
			return err
		}
	}
}

// readTail reads the members after the slots, checks the totals against
// what was read, and that nothing follows the document.
func (r *Reader) readTail() error {
	r.slot, r.msgIdx = Slot{}, -1
	slots := int64(r.slotIdx + 1)
	r.slotIdx = -1
	var t *totals
	for {
		name, end, err := r.key()
		if err != nil {
			return err
		}
		if end {
			break
		}
		switch name {
		case memberTotals:
			if t != nil {
				return fmt.Errorf("%w: %s twice", ErrMalformed, name)
			}
			raw, err := r.value(r.lim.MaxMessageBytes)
			if err != nil {
				return err
			}
			t = &totals{}
			if err := json.Unmarshal(raw, t); err != nil {
				return fmt.Errorf("%w: %s: %w", ErrMalformed, name, err)
			}
		case memberVersion, memberSession, memberSlots:
			return fmt.Errorf("%w: %s twice", ErrMalformed, name)
		default:
			if _, err := r.value(r.lim.MaxMessageBytes); err != nil {
				return err
			}
		}
	}
	if t == nil {
		return fmt.Errorf("%w: %s missing", ErrTruncated, memberTotals)
	}
	if t.Slots != slots || t.Messages != r.total {
		return fmt.Errorf("%w: %s say %d slots and %d messages, the document holds %d and %d", ErrTruncated, memberTotals, t.Slots, t.Messages, slots, r.total)
	}
	if _, err := r.token(); err != io.EOF {
		if err == nil {
			err = fmt.Errorf("%w: data after the document", ErrMalformed)
		}
		return err
	}
	return nil
}

// SlotReader is one slot of a document being read.
type SlotReader struct {
	Slot
	r   *Reader
	idx int
}

func (s *SlotReader) current() bool { return s.r.slotIdx == s.idx && s.r.state == inMessages }

// Messages yields the slot's messages in order, each checked against
// schemas/message.json. It yields nothing once the Reader moved past the
// slot; an error ends it and the Reader.
func (s *SlotReader) Messages() iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		if s.r.err != nil {
			// A Reader that failed fails every later read the same way.
			yield(abi.Message{}, s.r.err)
			return
		}
		for s.current() {
			m, ok, err := s.r.nextMessage()
			if err != nil {
				yield(abi.Message{}, s.r.fail(err))
				return
			}
			if !ok || !yield(m, nil) {
				return
			}
		}
	}
}

// Pages yields the slot's messages in pages of at most n (at least 1),
// each a new slice, for a caller that hands history to a plugin page by
// page.
func (s *SlotReader) Pages(n int) iter.Seq2[[]abi.Message, error] {
	n = max(n, 1)
	return func(yield func([]abi.Message, error) bool) {
		var page []abi.Message
		for m, err := range s.Messages() {
			if err != nil {
				yield(nil, err)
				return
			}
			page = append(page, m)
			if len(page) == n {
				if !yield(page, nil) {
					return
				}
				page = nil
			}
		}
		if len(page) > 0 {
			yield(page, nil)
		}
	}
}
