package portable

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
)

// Writer writes one portable document: NewWriter writes the session,
// BeginSlot starts each slot, WriteMessage appends one message of the
// current slot, Close ends the document. It holds one message at a time.
//
// Every slot of the session must be written once, in any order, and
// nothing else: Close refuses with ErrIncomplete otherwise, so a document
// that is complete syntactically is complete in content too. Each message
// is checked against schemas/message.json before it is written, so that
// what a Writer writes a Reader reads. After an error the Writer is
// unusable and what it wrote must be discarded.
type Writer struct {
	w       *bufio.Writer
	pending map[string]Slot
	slot    Slot
	slotIdx int
	msgIdx  int
	total   int64
	err     error
}

// NewWriter writes the start of the document of s to w: the format
// version and the session's own fields. s's state is not written; its
// keys are the slots the document must hold (see SlotsOf).
func NewWriter(w io.Writer, s *session.Session) (*Writer, error) {
	if s == nil {
		return nil, &Error{SlotIndex: -1, Message: -1, Offset: -1, Err: fmt.Errorf("%w: nil session", ErrMalformed)}
	}
	head, err := json.Marshal(fromSession(s))
	if err == nil {
		_, err = fromSession(s).toSession()
	}
	if err != nil {
		return nil, &Error{SlotIndex: -1, Message: -1, Offset: -1, Err: fmt.Errorf("%w: session: %w", ErrMalformed, err)}
	}
	wr := &Writer{w: bufio.NewWriterSize(w, 64<<10), pending: map[string]Slot{}, slotIdx: -1, msgIdx: -1}
	for _, sl := range SlotsOf(s) {
		wr.pending[sl.Key] = sl
	}
	wr.printf(`{"%s":"%s",`+"\n"+`"%s":%s,`+"\n"+`"%s":[`, memberVersion, FormatVersion, memberSession, head, memberSlots)
	if wr.err != nil {
		return nil, wr.err
	}
	return wr, nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = &Error{Slot: w.slot.Key, SlotIndex: w.slotIdx, Message: w.msgIdx, Offset: -1, Err: err}
	}
	return w.err
}

func (w *Writer) printf(format string, args ...any) {
	if w.err != nil {
		return
	}
	if _, err := fmt.Fprintf(w.w, format, args...); err != nil {
		w.fail(fmt.Errorf("portable: writing: %w", err))
	}
}

func (w *Writer) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.w.Write(b); err != nil {
		w.fail(fmt.Errorf("portable: writing: %w", err))
	}
}

// BeginSlot ends the current slot, if any, and starts the slot of the
// session's state key key; its plugin and version are the ones SlotsOf
// gives.
func (w *Writer) BeginSlot(key string) error {
	if w.err != nil {
		return w.err
	}
	sl, ok := w.pending[key]
	if !ok {
		w.slot, w.msgIdx = Slot{Key: key}, -1
		return w.fail(fmt.Errorf("%w: the session has no slot %q, or it was written already", ErrIncomplete, key))
	}
	delete(w.pending, key)
	w.endSlot()
	head, err := json.Marshal(sl)
	if err != nil {
		return w.fail(fmt.Errorf("%w: %w", ErrMalformed, err))
	}
	if w.slotIdx >= 0 {
		w.write([]byte(","))
	}
	w.slotIdx++
	w.slot, w.msgIdx = sl, -1
	// The slot's own members, then the messages: head is an object, so
	// drop its closing brace.
	w.write([]byte("\n"))
	w.write(head[:len(head)-1])
	w.printf(`,"%s":[`, memberMessages)
	return w.err
}

func (w *Writer) endSlot() {
	if w.slotIdx >= 0 {
		w.write([]byte("\n]}"))
	}
}

// WriteMessage appends m to the current slot's history.
func (w *Writer) WriteMessage(m abi.Message) error {
	if w.err != nil {
		return w.err
	}
	if w.slotIdx < 0 {
		return w.fail(fmt.Errorf("%w: a message before BeginSlot", ErrIncomplete))
	}
	w.msgIdx++
	b, err := json.Marshal(m)
	if err != nil {
		return w.fail(fmt.Errorf("%w: %w", ErrInvalidMessage, err))
	}
	if err := messageSchema().Validate(b); err != nil {
		return w.fail(fmt.Errorf("%w: %w", ErrInvalidMessage, err))
	}
	if w.msgIdx > 0 {
		w.write([]byte(","))
	}
	w.write([]byte("\n"))
	w.write(b)
	w.total++
	return w.err
}

// Close ends the document and flushes it to the io.Writer, which it does
// not close. It refuses with ErrIncomplete when a slot of the session was
// not written.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if len(w.pending) > 0 {
		missing := slices.Sorted(maps.Keys(w.pending))
		w.slot, w.slotIdx, w.msgIdx = Slot{}, -1, -1
		return w.fail(fmt.Errorf("%w: slots %q not written", ErrIncomplete, missing))
	}
	w.endSlot()
	t, _ := json.Marshal(totals{Slots: int64(w.slotIdx + 1), Messages: w.total})
	w.printf("\n],\n"+`"%s":%s}`+"\n", memberTotals, t)
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.fail(fmt.Errorf("portable: writing: %w", err))
		}
	}
	if w.err == nil {
		w.err = errClosed
		return nil
	}
	return w.err
}

var errClosed = &Error{SlotIndex: -1, Message: -1, Offset: -1, Err: fmt.Errorf("%w: the Writer is closed", ErrIncomplete)}
