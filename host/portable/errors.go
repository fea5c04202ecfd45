package portable

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrMalformed reports a document that is not the portable layout:
	// not JSON, members missing, repeated or out of order, a slot the
	// session does not name, totals that do not match.
	ErrMalformed = errors.New("portable: malformed document")
	// ErrVersion reports a format version whose major this package does
	// not read.
	ErrVersion = errors.New("portable: unknown format version")
	// ErrInvalidMessage reports a message that does not match
	// schemas/message.json.
	ErrInvalidMessage = errors.New("portable: invalid message")
	// ErrTruncated reports a document that ends before it is complete.
	ErrTruncated = errors.New("portable: document ends early")
	// ErrTooLarge reports a value larger than the Reader's Limits.
	ErrTooLarge = errors.New("portable: value too large")
	// ErrIncomplete reports a Writer closed before every slot of its
	// session was written, or used out of order.
	ErrIncomplete = errors.New("portable: export incomplete")
	// ErrConvert reports a message that has no equivalent in the other
	// format (see WriteOpenAI and ReadOpenAI).
	ErrConvert = errors.New("portable: message cannot be converted")
)

// Error says where in a document something failed. It wraps one of the
// package's sentinel errors.
type Error struct {
	// Slot is the key of the slot being read or written; empty outside
	// the slots, or before the slot's key was read.
	Slot string
	// SlotIndex counts slots from 0; -1 outside the slots.
	SlotIndex int
	// Message counts the slot's messages (or an OpenAI array's) from 0;
	// -1 when the failure is not at a message.
	Message int
	// Offset is the byte offset in the document where the failure was
	// noticed; -1 when writing.
	Offset int64
	// Err is the cause.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("portable: ")
	where := e.where()
	if where != "" {
		b.WriteString(where)
		b.WriteString(": ")
	}
	b.WriteString(strings.TrimPrefix(e.Err.Error(), "portable: "))
	if a := advice(e.Err); a != "" {
		b.WriteString(": ")
		b.WriteString(a)
	}
	return b.String()
}

func (e *Error) where() string {
	var parts []string
	switch {
	case e.Slot != "":
		parts = append(parts, fmt.Sprintf("slot %q", e.Slot))
	case e.SlotIndex >= 0:
		parts = append(parts, fmt.Sprintf("slot %d", e.SlotIndex))
	}
	if e.Message >= 0 {
		parts = append(parts, fmt.Sprintf("message %d", e.Message))
	}
	if e.Offset >= 0 {
		parts = append(parts, fmt.Sprintf("byte %d", e.Offset))
	}
	return strings.Join(parts, ", ")
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// errSessionFile is the malformed document most likely by mistake.
var errSessionFile = errors.New("a session file (schema_version), not a portable document")

// advice is what to do about a failure, by cause.
func advice(err error) string {
	switch {
	case errors.Is(err, errSessionFile):
		return "export the session to get one"
	case errors.Is(err, ErrVersion):
		return "read it with a wasmhist that knows that version"
	case errors.Is(err, ErrTruncated):
		return "the copy is incomplete; export the session again"
	case errors.Is(err, ErrTooLarge):
		return "raise the Reader's Limits if the document is trusted"
	case errors.Is(err, ErrInvalidMessage), errors.Is(err, ErrMalformed):
		return "the document was changed after export or not written by wasmhist"
	}
	return ""
}
