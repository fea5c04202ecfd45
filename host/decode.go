package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/internal/guestjson"
	"github.com/wasmhist/wasmhist/schemas"
)

// Plugin output is untrusted: every decoder here reports a problem as
// ErrInvalidOutput saying where, and never panics (see the fuzz tests).

// clip is s, or its first 64 bytes and "...", for a message quoting what
// a plugin chose, which may be megabytes.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

func invalidOutput(export, format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOutput, fmt.Sprintf(format, args...))
}

func unmarshalOutput(export string, out []byte, v any) error {
	// encoding/json replaces invalid UTF-8 in strings it decodes, but
	// keeps it in json.RawMessage values (states, messages), which would
	// then be stored and sent on: refuse the output whole (abi/SPEC.md
	// section 2.3).
	if !utf8.Valid(out) {
		return invalidOutput(export, "response is not valid UTF-8 (byte %d)", firstInvalidUTF8(out))
	}
	if err := json.Unmarshal(out, v); err != nil {
		return invalidOutput(export, "response is not the expected JSON: %v", err)
	}
	return nil
}

// firstInvalidUTF8 is the offset of the first byte of out that does not
// start a valid UTF-8 sequence.
func firstInvalidUTF8(out []byte) int {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(out)
}

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func decodeInfo(out []byte) (*abi.PluginInfo, error) {
	var info abi.PluginInfo
	if err := unmarshalOutput(abi.ExportDescribe, out, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func checkStateChange(export string, c *abi.StateChange) error {
	if isNull(c.State) {
		c.State = nil
	}
	if c.State != nil && len(c.Patch) > 0 {
		return invalidOutput(export, "state and state_patch are both set")
	}
	for i, op := range c.Patch {
		switch op.Op {
		case abi.PatchAdd, abi.PatchReplace:
			if len(op.Value) == 0 {
				return invalidOutput(export, "state_patch[%d]: %s without a value", i, op.Op)
			}
		case abi.PatchRemove:
		default:
			return invalidOutput(export, "state_patch[%d]: unknown op %q", i, op.Op)
		}
	}
	return nil
}

func decodeProvide(out []byte) (*abi.ProvideResponse, error) {
	r, ok := decodeOutputFast(out, true)
	if !ok {
		if err := unmarshalOutput(abi.ExportProvide, out, &r); err != nil {
			return nil, err
		}
	}
	if len(r.Messages) > 0 && r.FromState != nil {
		return nil, invalidOutput(abi.ExportProvide, "messages and from_state are both set")
	}
	if r.FromState != nil && r.FromState.Window != nil && (r.FromState.Window.MaxMessages < 0 || r.FromState.Window.MaxTokens < 0) {
		return nil, invalidOutput(abi.ExportProvide, "from_state.window has a negative bound")
	}
	if err := checkStateChange(abi.ExportProvide, &r.StateChange); err != nil {
		return nil, err
	}
	return &r, nil
}

// decodeChange decodes the response of store or clear.
func decodeChange(export string, out []byte) (*abi.StateChange, error) {
	var r abi.StoreResponse
	if p, ok := decodeOutputFast(out, false); ok {
		r.StateChange = p.StateChange
	} else if err := unmarshalOutput(export, out, &r); err != nil {
		return nil, err
	}
	if err := checkStateChange(export, &r.StateChange); err != nil {
		return nil, err
	}
	return &r.StateChange, nil
}

// errNotPlain stops decodeOutputFast at what it leaves to encoding/json.
var errNotPlain = errors.New("not a plain response")

// decodeOutputFast decodes the response of provide (provide set) or of
// store or clear the common way, in one validating pass of guestjson: into
// what unmarshalOutput makes of it in an abi.ProvideResponse, or in an
// abi.StoreResponse (whose StateChange is r's; without provide, messages and
// from_state are skipped, as encoding/json skips a field the struct
// lacks). A response goes through two passes of encoding/json otherwise
// (json.Unmarshal checks the whole document, then decodes it), and it
// holds a provide's whole window of messages.
//
// ok is false whenever the response is not valid UTF-8 and valid JSON of
// that shape or needs a rule of encoding/json this decoder does not
// implement: a syntax error, nesting past guestjson.MaxDepth, a member
// other than those named exactly (encoding/json also matches keys in
// another case), a duplicate member (encoding/json decodes the second over
// the first), a null or a value of another type where an object, array or
// string belongs. The caller then decodes it with unmarshalOutput, which
// accepts or refuses it and says why as it always has: this decoder never
// accepts what that refuses, and whatever it accepts it decodes to the
// same value (FuzzDecodeOutputFast). The raw values it returns alias out,
// which the caller gives up: invoke hands every decoder an output of its
// own, never a plugin's memory.
func decodeOutputFast(out []byte, provide bool) (r abi.ProvideResponse, ok bool) {
	if !utf8.Valid(out) {
		return r, false
	}
	d := guestjson.NewDecoder(out)
	if d.Peek() != '{' {
		return r, false
	}
	var seen guestjson.Members
	err := d.Object(func(key []byte) error {
		switch string(key) {
		case "messages", "from_state":
			if !provide {
				return d.Skip()
			}
			if string(key) == "from_state" {
				if !seen.Take(&d, 2, '{') {
					return errNotPlain
				}
				r.FromState = &abi.StateSelection{}
				return decodeSelectionFast(&d, r.FromState)
			}
			if !seen.Take(&d, 1, '[') {
				return errNotPlain
			}
			// Room for a database plugin's usual window at once.
			r.Messages = make([]json.RawMessage, 0, 32)
			return d.Array(func() error {
				v, err := d.ReadValue()
				r.Messages = append(r.Messages, v)
				return err
			})
		case "state":
			if !seen.Take(&d, 4, 0) {
				return errNotPlain
			}
			v, err := d.ReadValue()
			r.State = v
			return err
		case "state_patch":
			if !seen.Take(&d, 8, '[') {
				return errNotPlain
			}
			r.Patch = []abi.PatchOp{}
			return d.Array(func() error {
				var op abi.PatchOp
				err := decodePatchOpFast(&d, &op)
				r.Patch = append(r.Patch, op)
				return err
			})
		}
		return errNotPlain
	})
	if err != nil || d.End() != nil {
		return abi.ProvideResponse{}, false
	}
	return r, true
}

func decodeSelectionFast(d *guestjson.Decoder, s *abi.StateSelection) error {
	var seen uint8
	return d.Object(func(key []byte) error {
		switch {
		case string(key) == "pointer" && seen&1 == 0 && d.Peek() == '"':
			seen |= 1
			var err error
			s.Pointer, err = d.ReadString()
			return err
		case string(key) == "window" && seen&2 == 0 && d.Peek() == '{':
			seen |= 2
			s.Window = &abi.Window{}
			var wseen uint8
			return d.Object(func(key []byte) error {
				var err error
				switch {
				case string(key) == "max_messages" && wseen&1 == 0:
					wseen |= 1
					s.Window.MaxMessages, err = d.ReadInt()
				case string(key) == "max_tokens" && wseen&2 == 0:
					wseen |= 2
					s.Window.MaxTokens, err = d.ReadInt()
				default:
					err = errNotPlain
				}
				return err
			})
		}
		return errNotPlain
	})
}

func decodePatchOpFast(d *guestjson.Decoder, op *abi.PatchOp) error {
	if d.Peek() != '{' {
		return errNotPlain
	}
	var seen uint8
	return d.Object(func(key []byte) error {
		var err error
		switch {
		case string(key) == "op" && seen&1 == 0 && d.Peek() == '"':
			seen |= 1
			op.Op, err = d.ReadString()
		case string(key) == "path" && seen&2 == 0 && d.Peek() == '"':
			seen |= 2
			op.Path, err = d.ReadString()
		case string(key) == "value" && seen&4 == 0:
			seen |= 4
			op.Value, err = d.ReadValue()
		default:
			err = errNotPlain
		}
		return err
	})
}

func decodeList(out []byte) (*abi.ListResponse, error) {
	var r abi.ListResponse
	if err := unmarshalOutput(abi.ExportList, out, &r); err != nil {
		return nil, err
	}
	if s := r.FromState; s != nil {
		// The host pages a reference itself (SPEC section 4.4.1): a page
		// or a cursor of the plugin's own beside it would say two things.
		switch {
		case len(r.Messages) > 0:
			return nil, invalidOutput(abi.ExportList, "messages and from_state are both set")
		case r.NextCursor != "":
			return nil, invalidOutput(abi.ExportList, "from_state with a next_cursor: the host issues the cursors of a page by reference")
		case s.Window != nil:
			return nil, invalidOutput(abi.ExportList, "from_state of list has a window: list pages through everything stored")
		}
	}
	if r.FromState == nil && r.NextCursor != "" && len(r.Messages) == 0 {
		// SPEC section 4.4: paging must make progress.
		return nil, invalidOutput(abi.ExportList, "a page with next_cursor %q holds no message: a page other than the last holds at least one", clip(r.NextCursor))
	}
	return &r, nil
}

func decodeMigrate(out []byte) (json.RawMessage, error) {
	var r abi.MigrateStateResponse
	if err := unmarshalOutput(abi.ExportMigrateState, out, &r); err != nil {
		return nil, err
	}
	if isNull(r.State) {
		return nil, invalidOutput(abi.ExportMigrateState, "no state")
	}
	return r.State, nil
}

// decodeMessages validates messages a plugin returned by value against the
// message schema and decodes them. field names them in errors.
func decodeMessages(ctx context.Context, export, field string, raws []json.RawMessage) ([]abi.Message, error) {
	return decodeMessagesAt(ctx, export, field, 0, raws)
}

// decodeMessagesAt is decodeMessages of raws that start at index first of
// field, so that errors name the index in field.
func decodeMessagesAt(ctx context.Context, export, field string, first int, raws []json.RawMessage) ([]abi.Message, error) {
	msgs := make([]abi.Message, len(raws))
	for i, raw := range raws {
		if err := validateMessage(ctx, raw); err != nil {
			return nil, messageFailure(ctx, export, field, first+i, len(raw), err)
		}
		if err := json.Unmarshal(raw, &msgs[i]); err != nil {
			return nil, invalidOutput(export, "%s[%d]: %v", field, first+i, err)
		}
	}
	return msgs, nil
}

// decodeValueMessages is decodeMessages remembering, in cache, the
// messages the schema accepted by their exact bytes: a provide that
// answers by value (a database plugin's window of the newest messages)
// returns all but the newest turn's messages as the last provide did, and
// validating each against the message schema was the largest host cost of
// such a turn (RATIONALE: "Why does the host remember messages a plugin
// returned by value?").
func decodeValueMessages(ctx context.Context, cache *decodedMessages, export, field string, raws []json.RawMessage) ([]abi.Message, error) {
	msgs := make([]abi.Message, len(raws))
	validate := func(raw json.RawMessage) error { return validateMessage(ctx, raw) }
	if i, err := cache.decode(raws, msgs, false, validate, nil); err != nil {
		return nil, messageFailure(ctx, export, field, i, len(raws[i]), err)
	}
	return msgs, nil
}

// messageFailure is the error of message i of field, of size bytes, that
// failed err within the call's ctx: a validation the call's deadline
// stopped is ErrTimeout, any other failure an invalid output.
func messageFailure(ctx context.Context, export, field string, i, size int, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: the deadline passed while the host validated the plugin's %s[%d] of %d bytes", ErrTimeout, field, i, size)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return invalidOutput(export, "%s[%d]: %v", field, i, err)
}

// decodeStoredMessages decodes messages a plugin keeps in its state. The
// state was validated against the plugin's state_schema, so only the shape
// the host needs is checked here.
//
// With shared set, messages served from memory are the memory's own: the
// caller must hand out only cloneMessage copies of them, and may copy just
// the ones it keeps (a window over a long history keeps few).
//
// skip names the elements in errors: raws[0] is element 0, and raws[i]
// for i > 0 is element i+skip (the first element and the newest ones
// decode together when a window is chosen from the newest; skip 0 is the
// whole array).
func decodeStoredMessages(cache *decodedMessages, export, at string, raws []json.RawMessage, shared bool, skip int) ([]abi.Message, error) {
	msgs := make([]abi.Message, len(raws))
	i, err := cache.decode(raws, msgs, shared, nil, func(m *abi.Message) error {
		switch m.Role {
		case abi.RoleSystem, abi.RoleUser, abi.RoleAssistant, abi.RoleTool:
			return nil
		}
		return errBadRole
	})
	index := i
	if i > 0 {
		index += skip
	}
	switch {
	case errors.Is(err, errBadRole):
		return nil, invalidOutput(export, "from_state %s/%d: role %q is not a message role", at, index, msgs[i].Role)
	case err != nil:
		return nil, invalidOutput(export, "from_state %s/%d: not a message: %v", at, index, err)
	}
	return msgs, nil
}

var errBadRole = errors.New("not a message role")

// validateMessage checks a message a plugin returned by value against the
// message schema: a plain message (plainMessage) without the schema
// library, which allocated 13.6 kB and 249 objects to accept a one-line
// text message (its if/then branches each build a failure they discard),
// and any other through the library, which says what is wrong.
func validateMessage(ctx context.Context, raw json.RawMessage) error {
	if plainMessage(raw) {
		return nil
	}
	return schema.Project(schemas.Message).ValidateUntrusted(ctx, raw)
}

// plainMessage reports whether raw is a message of the plainest shape,
// which the message schema accepts without a doubt: one JSON object with
// "role" (one of the four roles, written without escapes), "contents" (an
// array of objects with "type" "text" or "reasoning" and optionally a
// string "text"), and optionally "source" (an object with "type" one of
// the three sources and optionally a string "id") and the strings
// "message_id" and "author_name", each member once. Anything else, and
// anything it is unsure of, it leaves to the schema (false):
// FuzzPlainMessage checks that the schema accepts whatever it accepts.
func plainMessage(raw []byte) bool {
	d := guestjson.NewDecoder(raw)
	if d.Peek() != '{' {
		return false
	}
	var seen guestjson.Members
	err := d.Object(func(key []byte) error {
		switch string(key) {
		case "role":
			if !seen.Take(&d, 1, '"') {
				return errNotPlain
			}
			return readOneOf(&d, `"system"`, `"user"`, `"assistant"`, `"tool"`)
		case "contents":
			if !seen.Take(&d, 2, '[') {
				return errNotPlain
			}
			return d.Array(func() error { return plainContent(&d) })
		case "source":
			if !seen.Take(&d, 4, '{') {
				return errNotPlain
			}
			var sseen uint8
			err := d.Object(func(key []byte) error {
				switch {
				case string(key) == "type" && sseen&1 == 0 && d.Peek() == '"':
					sseen |= 1
					return readOneOf(&d, `"external"`, `"chat_history"`, `"context_provider"`)
				case string(key) == "id" && sseen&2 == 0 && d.Peek() == '"':
					sseen |= 2
					return d.Skip()
				}
				return errNotPlain
			})
			if err == nil && sseen&1 == 0 {
				return errNotPlain
			}
			return err
		case "message_id":
			if !seen.Take(&d, 8, '"') {
				return errNotPlain
			}
			return d.Skip()
		case "author_name":
			if !seen.Take(&d, 16, '"') {
				return errNotPlain
			}
			return d.Skip()
		}
		return errNotPlain
	})
	return err == nil && seen&3 == 3 && d.End() == nil
}

// plainContent reads one content part of a plain message: {"type":"text"}
// or {"type":"reasoning"}, written without escapes, with optionally a
// string "text", each once.
func plainContent(d *guestjson.Decoder) error {
	if d.Peek() != '{' {
		return errNotPlain
	}
	var seen uint8
	err := d.Object(func(key []byte) error {
		switch {
		case string(key) == "type" && seen&1 == 0 && d.Peek() == '"':
			seen |= 1
			return readOneOf(d, `"text"`, `"reasoning"`)
		case string(key) == "text" && seen&2 == 0 && d.Peek() == '"':
			seen |= 2
			return d.Skip()
		}
		return errNotPlain
	})
	if err == nil && seen&1 == 0 {
		return errNotPlain
	}
	return err
}

// readOneOf reads a value whose exact bytes are one of want.
func readOneOf(d *guestjson.Decoder, want ...string) error {
	v, err := d.ReadValue()
	if err != nil {
		return err
	}
	for _, w := range want {
		if string(v) == w {
			return nil
		}
	}
	return errNotPlain
}
