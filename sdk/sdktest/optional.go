package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
)

// The cases of the optional exports list, clear and migrate_state (SPEC
// sections 4.4 to 4.6). Each runs only when the subject implements its
// export and is otherwise Skipped with SkipNotImplemented. They drive the
// exports with raw requests (Subject.Call), built as the host builds them:
// the state left out when the plugin lists the export in omit_state, and
// the subject's config when it has one (ConfigSubject).

// Reasons of the optional exports' cases.
const (
	// list_returns_stored_in_order: the pages of list, joined, are not
	// every stored message in order.
	ReasonListIncomplete Reason = "list_incomplete"
	// list_returns_stored_in_order: a page holds more than limit messages.
	ReasonPageOverLimit Reason = "page_over_limit"
	// list_cursor_advances_and_ends: a page that is not the last is empty
	// or repeats a page, or its next_cursor is the request's cursor.
	ReasonCursorStuck Reason = "cursor_stuck"
	// list_cursor_advances_and_ends: paging did not reach a last page
	// within one call per stored message and one more.
	ReasonPagingUnbounded Reason = "paging_unbounded"
	// clear_forgets_history: provide after clear returns history.
	ReasonHistoryAfterClear Reason = "history_after_clear"
	// clear_forgets_history: list after clear returns messages, with or
	// without a cursor issued before it.
	ReasonListAfterClear Reason = "list_after_clear"
	// clear_forgets_history (a rule of ABI 1.1): a cursor issued before
	// clear is refused with invalid_argument after it, where an empty last
	// page is due. Advice for a plugin that declares 1.0.
	ReasonStaleCursor Reason = "stale_cursor_not_empty_last_page"
	// migrate_state_serves_result: migrate_state fails on an older state,
	// or returns no state.
	ReasonMigrateFailed Reason = "migrate_failed"
	// migrate_state_serves_result: the migrated state does not serve the
	// history the older state held, before or after a store.
	ReasonMigratedHistoryWrong Reason = "migrated_history_wrong"
	// migrate_state_serves_result: an Options.OlderStates entry is not
	// older than the plugin's state_version (a mistake of the test, not of
	// the plugin).
	ReasonBadOlderState Reason = "bad_older_state"
)

// ConfigSubject is a Subject loaded with an operator's config. The suite
// sends Config in the raw requests it builds, as the host sends the loaded
// config with every call; a Subject without the method gets none.
type ConfigSubject interface {
	Subject
	Config() json.RawMessage
}

// ExportsSubject is a Subject that knows which exports its module has, as
// *host.Plugin does. The suite skips an optional export's case when the
// export is absent; without the method it calls the export and skips when
// the answer is unimplemented.
type ExportsSubject interface {
	Subject
	Exports() []string
}

// OlderState is a state an older version of a plugin wrote, for the
// migrate_state case (see Options).
type OlderState struct {
	// Version is the state_version the state was written at: lower than
	// the plugin's.
	Version int
	// State is the state as that version wrote it.
	State json.RawMessage
	// Messages is the history the state holds, oldest first: what provide
	// must return once migrate_state has upgraded it.
	Messages []json.RawMessage
}

// Options gives the suite what it cannot invent for a plugin.
type Options struct {
	// OlderStates feed the migrate_state case, which is skipped without
	// them: the suite cannot know an older layout of a plugin's state.
	OlderStates []OlderState
}

// config is the config the subject was loaded with, if it says.
func config(s Subject) json.RawMessage {
	if c, ok := s.(ConfigSubject); ok {
		return c.Config()
	}
	return nil
}

// absent reports whether the subject's module lacks an export.
func absent(s Subject, export string) bool {
	e, ok := s.(ExportsSubject)
	return ok && !slices.Contains(e.Exports(), export)
}

// notImplemented reports whether err is an optional export's
// "unimplemented", which SPEC section 4 reads as the export being absent.
func notImplemented(err error) bool { return errors.Is(err, abi.ErrUnimplemented) }

// rawRequest builds an export's request: state (unless omitted), config,
// session and fields.
func rawRequest(s Subject, export string, facts *abi.SessionFacts, state json.RawMessage, fields map[string]any) []byte {
	req := map[string]any{}
	for k, v := range fields {
		req[k] = v
	}
	if facts != nil {
		req["session"] = facts
	}
	if !slices.Contains(s.Info().OmitState, export) && state != nil {
		req["state"] = state
	}
	if c := config(s); len(c) > 0 {
		req["config"] = c
	}
	return mustJSON(req)
}

// list runs list on the slot and returns one page.
func (sl *slot) list(ctx context.Context, s Subject, cursor string, limit int) (*abi.ListResponse, error) {
	fields := map[string]any{}
	if cursor != "" {
		fields["cursor"] = cursor
	}
	if limit > 0 {
		fields["limit"] = limit
	}
	out, err := s.Call(ctx, abi.ExportList, rawRequest(s, abi.ExportList, &sl.facts, sl.state, fields))
	if err != nil {
		return nil, fmt.Errorf("list (key %q, cursor %q, limit %d): %w", sl.facts.StateKey, cursor, limit, err)
	}
	var page abi.ListResponse
	if err := json.Unmarshal(out, &page); err != nil {
		return nil, fmt.Errorf("list returned %q, not a ListResponse: %w", out, err)
	}
	if page.FromState != nil {
		// A page by reference (ABI 1.1): served from the state as the
		// host serves it, with the host's cursors.
		return pageFromState(sl.state, page.FromState.Pointer, cursor, limit)
	}
	return &page, nil
}

// pageFromState is the host's page of a list answered by reference (SPEC
// section 4.4.1): the elements of the array at pointer from the index the
// cursor holds, at most limit (default 100), the next index as next_cursor.
func pageFromState(state json.RawMessage, pointer, cursor string, limit int) (*abi.ListResponse, error) {
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("list: cursor %q: %w", cursor, abi.ErrInvalidArgument)
		}
		start = n
	}
	if limit <= 0 {
		limit = 100
	}
	tokens, err := pointerTokens(pointer)
	if err != nil {
		return nil, fmt.Errorf("list: from_state: %w", err)
	}
	node, err := decodeValue(state)
	if err != nil {
		return nil, fmt.Errorf("list: from_state: state: %w", err)
	}
	for _, tok := range tokens {
		switch n := node.(type) {
		case map[string]any:
			node = n[tok] // a missing member selects nothing
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil, fmt.Errorf("list: from_state pointer %q: index %q out of range", pointer, tok)
			}
			node = n[i]
		default:
			node = nil
		}
	}
	var all []any
	switch n := node.(type) {
	case nil:
	case []any:
		all = n
	default:
		return nil, fmt.Errorf("list: from_state pointer %q does not name an array", pointer)
	}
	start = min(start, len(all))
	end := min(start+limit, len(all))
	page := &abi.ListResponse{Messages: []json.RawMessage{}}
	for _, m := range all[start:end] {
		page.Messages = append(page.Messages, mustJSON(m))
	}
	if end < len(all) {
		page.NextCursor = strconv.Itoa(end)
	}
	return page, nil
}

// clear runs clear on the slot and applies its state change.
func (sl *slot) clear(ctx context.Context, s Subject) error {
	out, err := s.Call(ctx, abi.ExportClear, rawRequest(s, abi.ExportClear, &sl.facts, sl.state, map[string]any{}))
	if err != nil {
		return fmt.Errorf("clear (key %q): %w", sl.facts.StateKey, err)
	}
	var resp abi.ClearResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("clear returned %q, not a ClearResponse: %w", out, err)
	}
	next, err := applyChange(sl.state, resp.StateChange)
	if err != nil {
		return fmt.Errorf("clear's state change: %w", err)
	}
	sl.state = next
	return nil
}

// listAll pages through the slot with limit, checking the paging rules of
// SPEC section 4.4, and returns every message listed.
func (sl *slot) listAll(ctx context.Context, s Subject, limit, stored int) ([]json.RawMessage, error) {
	var all []json.RawMessage
	cursor := ""
	seen := map[string]bool{}
	// One page per stored message, and the last page, is the most a
	// conforming plugin needs with any positive limit.
	for calls := 1; ; calls++ {
		if calls > stored+1 {
			return all, failf(ReasonPagingUnbounded, "list with limit %d made %d calls over %d stored messages without reaching a page with no next_cursor", limit, calls-1, stored)
		}
		page, err := sl.list(ctx, s, cursor, limit)
		if err != nil {
			return all, err
		}
		if limit > 0 && len(page.Messages) > limit {
			return all, failf(ReasonPageOverLimit, "list with limit %d returned a page of %d messages", limit, len(page.Messages))
		}
		all = append(all, page.Messages...)
		if page.NextCursor == "" {
			return all, nil
		}
		if page.NextCursor == cursor {
			return all, failf(ReasonCursorStuck, "list page %d returned next_cursor %q, the cursor it was asked for: paging never ends", calls, cursor)
		}
		if len(page.Messages) == 0 {
			return all, failf(ReasonCursorStuck, "list page %d (cursor %q) is empty but has next_cursor %q: only the last page may be empty", calls, cursor, page.NextCursor)
		}
		key := string(mustJSON(page.Messages))
		if seen[key] {
			return all, failf(ReasonCursorStuck, "list page %d (cursor %q) repeats an earlier page: %s", calls, cursor, summary(page.Messages))
		}
		seen[key] = true
		cursor = page.NextCursor
	}
}

// listed stores turns in a fresh slot, or skips when the subject has no
// list: the start of both list cases.
func listed(ctx context.Context, f Factory, tag string) (Subject, *slot, []json.RawMessage, error) {
	s, err := newSubject(ctx, f)
	if err != nil {
		return nil, nil, nil, err
	}
	if absent(s, abi.ExportList) {
		return nil, nil, nil, skip(SkipNotImplemented)
	}
	sl := newSlot(s, newSessionID(), "history")
	if _, err := sl.list(ctx, s, "", 0); notImplemented(err) {
		return nil, nil, nil, skip(SkipNotImplemented)
	} else if err != nil {
		return nil, nil, nil, fmt.Errorf("on the initial state: %w", err)
	}
	turns := script(tag, 4)
	for i, t := range turns {
		if err := sl.store(ctx, s, t); err != nil {
			return nil, nil, nil, fmt.Errorf("turn %d: %w", i, err)
		}
	}
	return s, sl, stored(turns), nil
}

func caseListInOrder(ctx context.Context, f Factory) error {
	s, sl, want, err := listed(ctx, f, "list")
	if err != nil {
		return err
	}
	// A small limit makes several pages; no limit is the plugin's default
	// page size, and the first page is the same whether the cursor is
	// absent or "".
	for _, limit := range []int{3, 1, 0} {
		got, err := sl.listAll(ctx, s, limit, len(want))
		if err != nil {
			return fmt.Errorf("limit %d: %w", limit, err)
		}
		if err := sameMessages(got, want); err != nil {
			return because(ReasonListIncomplete, fmt.Errorf("list pages with limit %d joined: %w", limit, err))
		}
	}
	out, err := s.Call(ctx, abi.ExportList, rawRequest(s, abi.ExportList, &sl.facts, sl.state, map[string]any{"cursor": "", "limit": 3}))
	if err != nil {
		return fmt.Errorf("list with cursor \"\": %w", err)
	}
	var page abi.ListResponse
	if err := json.Unmarshal(out, &page); err != nil {
		return fmt.Errorf("list returned %q, not a ListResponse: %w", out, err)
	}
	if page.FromState != nil {
		p, err := pageFromState(sl.state, page.FromState.Pointer, "", 3)
		if err != nil {
			return err
		}
		page = *p
	}
	if err := sameMessages(page.Messages, want[:3]); err != nil {
		return because(ReasonListIncomplete, fmt.Errorf("list with cursor \"\" is not the first page: %w", err))
	}
	return nil
}

func caseListCursor(ctx context.Context, f Factory) error {
	s, sl, want, err := listed(ctx, f, "cursor")
	if err != nil {
		return err
	}
	for _, limit := range []int{2, 5} {
		got, err := sl.listAll(ctx, s, limit, len(want))
		if err != nil {
			return fmt.Errorf("limit %d: %w", limit, err)
		}
		if len(got) > len(want) {
			return failf(ReasonCursorStuck, "list with limit %d returned %d messages over its pages for %d stored: pages overlap", limit, len(got), len(want))
		}
	}
	return nil
}

func caseClear(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	if absent(s, abi.ExportClear) {
		return skip(SkipNotImplemented)
	}
	lists := !absent(s, abi.ExportList)
	sl := newSlot(s, newSessionID(), "history")
	turns := script("clear", 3)
	for i, t := range turns {
		if err := sl.store(ctx, s, t); err != nil {
			return fmt.Errorf("turn %d: %w", i, err)
		}
	}
	// A cursor into the stored history, to use again after clear.
	var stale string
	if lists {
		page, err := sl.list(ctx, s, "", 4)
		switch {
		case notImplemented(err):
			lists = false
		case err != nil:
			return fmt.Errorf("before clear: %w", err)
		default:
			stale = page.NextCursor
		}
	}
	if err := sl.clear(ctx, s); notImplemented(err) {
		return skip(SkipNotImplemented)
	} else if err != nil {
		return err
	}
	history, err := sl.provide(ctx, s)
	if err != nil {
		return fmt.Errorf("after clear: %w", err)
	}
	if len(history) != 0 {
		return failf(ReasonHistoryAfterClear, "provide after clear returned %d messages, want none: %s", len(history), summary(history))
	}
	if lists {
		page, err := sl.list(ctx, s, "", 0)
		if err != nil {
			return fmt.Errorf("after clear: %w", err)
		}
		if len(page.Messages) != 0 || page.NextCursor != "" {
			return failf(ReasonListAfterClear, "list after clear returned %d messages and next_cursor %q, want an empty last page: %s", len(page.Messages), page.NextCursor, summary(page.Messages))
		}
		if stale != "" {
			if err := staleCursor(ctx, s, sl, stale); err != nil {
				return err
			}
		}
	}
	// The key works again from scratch.
	t := script("after-clear", 1)[0]
	if err := sl.store(ctx, s, t); err != nil {
		return fmt.Errorf("after clear: %w", err)
	}
	history, err = sl.provide(ctx, s)
	if err != nil {
		return fmt.Errorf("after clear: %w", err)
	}
	if err := sameMessages(history, stored([]turn{t})); err != nil {
		return because(ReasonHistoryAfterClear, fmt.Errorf("store then provide after clear: %w", err))
	}
	return nil
}

// staleCursor checks list after clear with a cursor issued before it. The
// page must hold no messages (clear forgot them) and end the paging; from
// ABI 1.1 it must be an empty last page rather than invalid_argument, as
// the host's own pages by reference are (SPEC section 4.4).
func staleCursor(ctx context.Context, s Subject, sl *slot, stale string) error {
	page, err := sl.list(ctx, s, stale, 4)
	switch {
	case errors.Is(err, abi.ErrInvalidArgument):
		return rule(ctx, ReasonStaleCursor, fmt.Errorf("after clear, a cursor issued before it (%q) was refused; SPEC 4.4: from ABI 1.1, answer an empty last page: %w", stale, err))
	case err != nil:
		return fmt.Errorf("after clear, with a cursor issued before it (%q; SPEC 4.4: an empty last page, or invalid_argument from a 1.0 plugin): %w", stale, err)
	case len(page.Messages) != 0:
		return failf(ReasonListAfterClear, "list after clear with a cursor issued before it (%q) returned %d cleared messages: %s", stale, len(page.Messages), summary(page.Messages))
	case page.NextCursor != "":
		return failf(ReasonCursorStuck, "list after clear with a cursor issued before it (%q) returned an empty page with next_cursor %q: only the last page may be empty", stale, page.NextCursor)
	}
	return nil
}

func caseMigrate(opts Options) func(ctx context.Context, f Factory) error {
	return func(ctx context.Context, f Factory) error {
		s, err := newSubject(ctx, f)
		if err != nil {
			return err
		}
		if absent(s, abi.ExportMigrateState) {
			return skip(SkipNotImplemented)
		}
		current := s.Info().StateVersion
		// Whether the plugin implements the export comes first; any other
		// answer to this probe (from_version 0 is older than any state a
		// plugin wrote) is the plugin's business.
		_, err = s.Call(ctx, abi.ExportMigrateState, rawRequest(s, abi.ExportMigrateState, nil, nil,
			map[string]any{"from_version": 0, "state": s.InitialState()}))
		if notImplemented(err) {
			return skip(SkipNotImplemented)
		}
		if len(opts.OlderStates) == 0 {
			return skip("no state of an older state_version given (wasmhist conformance --older-state FILE, or sdktest.Options.OlderStates)")
		}
		for _, old := range opts.OlderStates {
			if old.Version >= current {
				return failf(ReasonBadOlderState, "older state of version %d is not older than the plugin's state_version %d", old.Version, current)
			}
			out, err := s.Call(ctx, abi.ExportMigrateState, rawRequest(s, abi.ExportMigrateState, nil, nil,
				map[string]any{"from_version": old.Version, "state": old.State}))
			if notImplemented(err) {
				return skip(SkipNotImplemented)
			}
			if err != nil {
				return because(ReasonMigrateFailed, fmt.Errorf("migrate_state from version %d: %w", old.Version, err))
			}
			var resp abi.MigrateStateResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.State) == 0 || string(resp.State) == "null" {
				return failf(ReasonMigrateFailed, "migrate_state from version %d returned %q, not {\"state\": ...}", old.Version, out)
			}
			sl := newSlot(s, newSessionID(), "history")
			sl.state = resp.State
			history, err := sl.provide(ctx, s)
			if err != nil {
				return because(ReasonMigratedHistoryWrong, fmt.Errorf("the state migrated from version %d: %w", old.Version, err))
			}
			if err := sameMessages(history, old.Messages); err != nil {
				return because(ReasonMigratedHistoryWrong, fmt.Errorf("provide on the state migrated from version %d: %w", old.Version, err))
			}
			t := script("migrated", 1)[0]
			if err := sl.store(ctx, s, t); err != nil {
				return because(ReasonMigratedHistoryWrong, fmt.Errorf("the state migrated from version %d: %w", old.Version, err))
			}
			if history, err = sl.provide(ctx, s); err == nil {
				err = sameMessages(history, slices.Concat(old.Messages, stored([]turn{t})))
			}
			if err != nil {
				return because(ReasonMigratedHistoryWrong, fmt.Errorf("store then provide on the state migrated from version %d: %w", old.Version, err))
			}
		}
		return nil
	}
}

// applyChange returns state after a state change (SPEC section 5.2): a
// whole state, a patch of add, replace and remove, or no change.
func applyChange(state json.RawMessage, c abi.StateChange) (json.RawMessage, error) {
	switch {
	case c.State != nil && c.Patch != nil:
		return nil, errors.New("both state and state_patch")
	case c.State != nil:
		if !json.Valid(c.State) {
			return nil, fmt.Errorf("state %q is not JSON", c.State)
		}
		return c.State, nil
	case len(c.Patch) == 0:
		return state, nil
	}
	doc, err := decodeValue(state)
	if err != nil {
		return nil, fmt.Errorf("current state: %w", err)
	}
	for _, op := range c.Patch {
		var v any
		if op.Op != abi.PatchRemove {
			if v, err = decodeValue(op.Value); err != nil {
				return nil, fmt.Errorf("patch %s %s: value: %w", op.Op, op.Path, err)
			}
		}
		tokens, err := pointerTokens(op.Path)
		if err != nil {
			return nil, err
		}
		if doc, err = patchAt(doc, tokens, op.Op, v); err != nil {
			return nil, fmt.Errorf("patch %s %s: %w", op.Op, op.Path, err)
		}
	}
	return mustJSON(doc), nil
}

func decodeValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	return v, d.Decode(&v)
}

func pointerTokens(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("pointer %q does not start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// patchAt applies one operation at tokens below node and returns the node.
func patchAt(node any, tokens []string, op string, v any) (any, error) {
	if len(tokens) == 0 {
		if op == abi.PatchRemove {
			return nil, errors.New("cannot remove the whole state")
		}
		return v, nil
	}
	tok, last := tokens[0], len(tokens) == 1
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[tok]
		switch {
		case !last && !ok:
			return nil, fmt.Errorf("no member %q", tok)
		case !last:
			next, err := patchAt(child, tokens[1:], op, v)
			n[tok] = next
			return n, err
		case op == abi.PatchAdd:
			n[tok] = v
		case !ok:
			return nil, fmt.Errorf("no member %q", tok)
		case op == abi.PatchReplace:
			n[tok] = v
		case op == abi.PatchRemove:
			delete(n, tok)
		default:
			return nil, fmt.Errorf("unknown op %q", op)
		}
		return n, nil
	case []any:
		if last && op == abi.PatchAdd && tok == "-" {
			return append(n, v), nil
		}
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i > len(n) || (i == len(n) && !(last && op == abi.PatchAdd)) {
			return nil, fmt.Errorf("index %q out of range of %d elements", tok, len(n))
		}
		switch {
		case !last:
			next, err := patchAt(n[i], tokens[1:], op, v)
			n[i] = next
			return n, err
		case op == abi.PatchAdd:
			return slices.Insert(n, i, v), nil
		case op == abi.PatchReplace:
			n[i] = v
			return n, nil
		case op == abi.PatchRemove:
			return slices.Delete(n, i, i+1), nil
		}
		return nil, fmt.Errorf("unknown op %q", op)
	}
	return nil, fmt.Errorf("step %q into a %T", tok, node)
}
