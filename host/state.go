package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/statepatch"
	"github.com/wasmhist/wasmhist/host/internal/window"
)

// applyWindow is the host's window over a whole history a plugin selects
// from its state (a window decided by the newest messages alone goes
// through window.Newest); a variable so that tests can observe it.
var applyWindow = window.Apply

// validateState checks a state against the plugin's state_schema, skipping
// states this plugin already accepted: the document of a cached Doc (every
// Doc the host keeps holds a validated state) or one p.valid
// remembers.
func (p *Plugin) validateState(ctx context.Context, state json.RawMessage) error {
	_, err := p.checkState(ctx, state)
	return err
}

// checkState is validateState, and returns the Claim of the cached Doc
// whose document state is, when there is one: the call that holds state
// then takes that Doc (applyChange, selectFromState, pageFromState)
// without comparing the state with it a second time, a pass over the
// whole state that at 100,000 messages (54 MB) no longer fits the
// processor's caches.
//
// The validation stops when ctx ends, with an error wrapping ctx's.
func (p *Plugin) checkState(ctx context.Context, state json.RawMessage) (statepatch.Claim, error) {
	if cl, ok := p.docs.Claim(state); ok {
		return cl, nil
	}
	if p.valid.Contains(state) {
		return statepatch.Claim{}, nil
	}
	if err := p.stateSchema.ValidateContext(ctx, state); err != nil {
		return statepatch.Claim{}, err
	}
	p.valid.Add(state)
	return statepatch.Claim{}, nil
}

// slotState returns the state to call the plugin with for a session slot
// (nil: the slot does not exist yet), migrating an older state first, and
// the Claim of its cached Doc (checkState).
func (p *Plugin) slotState(ctx context.Context, facts abi.SessionFacts, slot *session.ProviderState) (json.RawMessage, statepatch.Claim, error) {
	if slot == nil {
		return p.initialState(), statepatch.Claim{}, nil
	}
	key := facts.StateKey
	if slot.Provider != p.info.Name {
		return nil, statepatch.Claim{}, fmt.Errorf("%w: state key %q belongs to plugin %q, not %q", ErrInvalidSession, key, slot.Provider, p.info.Name)
	}
	state := slot.Data
	switch {
	case slot.StateVersion > p.info.StateVersion:
		return nil, statepatch.Claim{}, fmt.Errorf("%w (%w): state key %q was written by state version %d of %s, which is newer than the loaded plugin's %d: load a newer build of the plugin",
			ErrInvalidState, ErrStateVersion, key, slot.StateVersion, p.info.Name, p.info.StateVersion)
	case slot.StateVersion < p.info.StateVersion:
		migrated, err := p.migrate(ctx, key, slot.StateVersion, state)
		if err != nil {
			return nil, statepatch.Claim{}, err
		}
		state = migrated
	}
	if isNull(state) {
		return nil, statepatch.Claim{}, fmt.Errorf("%w: state key %q has no data", ErrInvalidState, key)
	}
	cl, err := p.checkState(ctx, state)
	if ctx.Err() != nil {
		return nil, statepatch.Claim{}, fmt.Errorf("host: validating state key %q of %s: %w", key, p.info.Name, ctx.Err())
	}
	if err != nil {
		return nil, statepatch.Claim{}, fmt.Errorf("%w: state key %q: %w", ErrInvalidState, key, err)
	}
	return state, cl, nil
}

func (p *Plugin) migrate(ctx context.Context, key string, from int, state json.RawMessage) (json.RawMessage, error) {
	if !p.has(abi.ExportMigrateState) {
		return nil, fmt.Errorf("%w (%w): state key %q is at state version %d, %s is at %d and has no migrate_state export: a build that raises state_version implements migrate_state from the versions before (sdk.StateMigrator)",
			ErrInvalidState, ErrStateVersion, key, from, p.info.Name, p.info.StateVersion)
	}
	r := newRequest(len(state))
	r.value("from_version", from)
	r.raw("state", state)
	r.raw("config", p.config)
	var out json.RawMessage
	err := p.invoke(ctx, abi.ExportMigrateState, r.bytes(), func(ctx context.Context, b []byte) error {
		s, err := decodeMigrate(b)
		if err != nil {
			return err
		}
		if _, err := p.checkOutputState(ctx, abi.ExportMigrateState, s); err != nil {
			return err
		}
		out = s
		return nil
	})
	return out, err
}

// checkOutputState is checkState of a state the plugin returned from
// export, within the call's ctx: a validation the call's deadline stopped
// is ErrTimeout, any other failure an invalid output.
func (p *Plugin) checkOutputState(ctx context.Context, export string, state json.RawMessage) (statepatch.Claim, error) {
	cl, err := p.checkState(ctx, state)
	switch {
	case err == nil:
		return cl, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return statepatch.Claim{}, fmt.Errorf("%w: the deadline passed while the host validated the plugin's state of %d bytes", ErrTimeout, len(state))
	case ctx.Err() != nil:
		return statepatch.Claim{}, ctx.Err()
	}
	return statepatch.Claim{}, invalidOutput(export, "state: %v", err)
}

// applyChange returns the state after a change, validated, and the Claim of
// the cached Doc of it (the zero Claim when none is known); changed is false
// when the response left the state alone. cl is the Claim of state's Doc.
//
// A patch is applied by package statepatch to the indexed Doc of state,
// which edits its own buffer in place (that is what makes an append cost
// O(appended)) and hands out a copy: the returned state is new bytes, and
// state itself is never written, so a failed call, or a caller who kept
// the old state, sees it as it was.
func (p *Plugin) applyChange(ctx context.Context, export string, state json.RawMessage, cl statepatch.Claim, c *abi.StateChange) (json.RawMessage, statepatch.Claim, bool, error) {
	switch {
	case c.State != nil:
		// The plugin's bytes: compared with the cache here, and the Claim
		// holds while the call holds them (nothing writes a decoded output).
		ncl, err := p.checkOutputState(ctx, export, c.State)
		if err != nil {
			return nil, statepatch.Claim{}, false, err
		}
		return c.State, ncl, true, nil
	case len(c.Patch) > 0:
		doc, err := p.docs.TakeClaimed(state, cl)
		if err != nil {
			return nil, statepatch.Claim{}, false, invalidOutput(export, "state_patch: current state: %v", err)
		}
		if err := doc.ApplyContext(ctx, c.Patch, p.stateSchema); err != nil {
			if ctx.Err() != nil {
				// The call's deadline passed among the operations: the
				// Doc is half patched and dropped (undoing would take as
				// long again); the state is as it was.
				return nil, statepatch.Claim{}, false, fmt.Errorf("%w: the deadline passed while the host applied the plugin's state_patch of %d operations", ErrTimeout, len(c.Patch))
			}
			p.docs.Put(doc) // unchanged: a failed Apply undoes itself
			return nil, statepatch.Claim{}, false, invalidOutput(export, "state_patch: %v", err)
		}
		defer p.docs.Put(doc)
		// next is a copy of the Doc's document, which it stays until the
		// Doc's next edit: its Claim is that.
		return doc.Bytes(), statepatch.ClaimOf(doc), true, nil
	}
	return state, cl, false, nil
}

// selectFromState resolves a from_state selection against state: the
// messages at the pointer, reduced by the window. It returns them decoded
// and, when raw is set, as the plugin stored them too.
func (p *Plugin) selectFromState(export string, state json.RawMessage, cl statepatch.Claim, sel *abi.StateSelection, raw bool) ([]json.RawMessage, []abi.Message, error) {
	// The indexed document the last patch left in the cache finds the
	// array's elements without scanning the state. Its views stay valid
	// while this call holds the Doc. A missing member or null selects no
	// history.
	doc, err := p.docs.TakeClaimed(state, cl)
	if err != nil {
		return nil, nil, invalidOutput(export, "from_state: state: %v", err)
	}
	defer p.docs.Put(doc)
	var w abi.Window
	if sel.Window != nil {
		w = *sel.Window
	}
	first, n, err := doc.ElementRange(sel.Pointer, 0, 1)
	if errors.Is(err, statepatch.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, invalidOutput(export, "from_state pointer %q: %v", sel.Pointer, err)
	}
	// A window is chosen from the newest messages backwards, decoding
	// only those it needs (window.Newest): the first message, which may
	// be the system message it keeps, and the newest, read back from the
	// end until the window is decided, twice as many each time. A
	// window over 100,000 messages then costs about its own size, where
	// decoding the whole history compared each message's bytes with the
	// remembered ones, a pass over the state (RATIONALE: "Why is a window
	// over a plugin's state chosen from the newest message backwards?").
	var raws []json.RawMessage // the elements from n-len(raws) on
	var kept []abi.Message
	head := 0
	for k := windowReach(w); ; k *= 2 {
		if k <= 0 || k >= n-1 {
			// The whole history: every element decoded, as without a
			// window.
			if raws, err = doc.Elements(sel.Pointer); err != nil {
				return nil, nil, invalidOutput(export, "from_state pointer %q: %v", sel.Pointer, err)
			}
			msgs, err := decodeStoredMessages(&p.decoded, export, sel.Pointer, raws, true, 0)
			if err != nil {
				return nil, nil, err
			}
			if len(msgs) > 0 && msgs[0].Role == abi.RoleSystem {
				head = 1
			}
			kept = applyWindow(msgs, w)
			break
		}
		if raws, _, err = doc.ElementRange(sel.Pointer, n-k, n); err != nil {
			return nil, nil, invalidOutput(export, "from_state pointer %q: %v", sel.Pointer, err)
		}
		// The first element and the newest k, in one decode, so that the
		// memory of decoded messages remembers them in this order and
		// finds them by it next time.
		both := make([]json.RawMessage, 0, 1+k)
		msgs, err := decodeStoredMessages(&p.decoded, export, sel.Pointer, append(append(both, first...), raws...), true, n-k-1)
		if err != nil {
			return nil, nil, err
		}
		var h []abi.Message
		if msgs[0].Role == abi.RoleSystem {
			h, head = msgs[:1], 1
		}
		// n-k > 1: the first element is never among the newest k, so the
		// history's body goes on before them (whole is false).
		var ok bool
		if kept, ok = window.Newest(h, msgs[1:], false, w); ok {
			break
		}
	}
	// msgs share the host's memory of decoded messages: the caller gets
	// copies of the ones kept, and only of those.
	cloneMessages(kept)
	if !raw {
		return nil, kept, nil
	}
	// A window keeps a leading system message and a contiguous run of the
	// newest messages (package reducer), so the raw messages kept are the
	// same head and tail.
	head = min(head, len(kept))
	tail := len(kept) - head
	keptRaw := make([]json.RawMessage, 0, len(kept))
	keptRaw = append(keptRaw, first[:head]...)
	keptRaw = append(keptRaw, raws[len(raws)-tail:]...)
	// Elements are views into the Doc, which the next patch edits in
	// place once it is back in the cache: the caller gets its own copy.
	for i, r := range keptRaw {
		keptRaw[i] = append(json.RawMessage(nil), r...)
	}
	return keptRaw, kept, nil
}

// windowReach is how many of the newest messages window.Newest is first
// given for w: enough to decide a window of max_messages over a history
// without tool calls (the message past the window included), and for a
// window of tokens alone, 64; 0 (the whole history) for no window.
func windowReach(w abi.Window) int {
	switch {
	case w.MaxMessages > 0:
		return w.MaxMessages + 1
	case w.MaxTokens > 0:
		return 64
	}
	return 0
}

// DefaultListPage is how many messages the host puts in a page of list it
// serves from the state (SPEC section 4.4.1) when the caller names no limit.
const DefaultListPage = 100

// pageFromState serves a list page by reference: the elements of the
// array at pointer from the cursor's index on, at most limit of them. The
// cursor is the host's own, the decimal index of the page's first element;
// the next one is issued while elements remain. Through the indexed
// document this costs the page, not the history: the Doc the last store
// left in the cache already knows where every element is.
func (p *Plugin) pageFromState(ctx context.Context, state json.RawMessage, cl statepatch.Claim, pointer, cursor string, limit int) ([]abi.Message, string, error) {
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || strconv.Itoa(n) != cursor {
			return nil, "", &abi.Error{Code: abi.CodeInvalidArgument, Message: "list: cursor " + strconv.Quote(cursor) +
				" is not one the host issued for a page from the state: it is a message index, a non-negative decimal integer"}
		}
		start = n
	}
	if limit <= 0 {
		limit = DefaultListPage
	}
	if _, err := statepatch.ParsePointer(pointer); err != nil {
		return nil, "", invalidOutput(abi.ExportList, "from_state pointer %q: %v", pointer, err)
	}
	doc, err := p.docs.TakeClaimed(state, cl)
	if err != nil {
		return nil, "", invalidOutput(abi.ExportList, "from_state: state: %v", err)
	}
	defer p.docs.Put(doc)
	raws, total, err := doc.ElementRange(pointer, start, start+min(limit, math.MaxInt-start))
	if errors.Is(err, statepatch.ErrNotFound) {
		return []abi.Message{}, "", nil
	}
	if err != nil {
		return nil, "", invalidOutput(abi.ExportList, "from_state pointer %q: %v", pointer, err)
	}
	// The page is checked against the message schema as a page by value
	// is, so list still vouches for every message it returns (the state
	// schema may allow any object); that costs the page. Decoding copies
	// what the caller keeps out of the Doc's buffer, which the next patch
	// edits in place.
	msgs, err := decodeMessagesAt(ctx, abi.ExportList, "from_state "+pointer+": messages", start, raws)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if end := start + len(raws); end < total {
		next = strconv.Itoa(end)
	}
	return msgs, next, nil
}

// initialState is a copy of the plugin's initial state: a new slot's bytes
// go to the caller, who may edit them, and p.initial is shared by every
// call.
func (p *Plugin) initialState() json.RawMessage { return bytes.Clone(p.initial) }

func wrapInvalidState(err error) error { return fmt.Errorf("%w: %w", ErrInvalidState, err) }
