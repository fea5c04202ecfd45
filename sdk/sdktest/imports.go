package sdktest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
)

// The cases of how a history gets into a key: through store, in pages that
// carry only request messages, as an importer writes it (SPEC section 4.3),
// and in stores whose messages split a tool call from its result, as
// per-service-call persistence makes them. Both are rules of ABI 1.2.

// Reasons of the import and split-pair cases.
const (
	// import_pages_read_back: store refused a page of an imported history
	// (request messages only, assistant and tool messages among them).
	ReasonImportRefused Reason = "import_page_refused"
	// import_pages_read_back: the history read back after an import is not
	// the imported one, message by message.
	ReasonImportDiffers Reason = "imported_history_differs"
	// store_keeps_split_pairs: store refused messages that end between a
	// tool call and its result, or start with a result whose call an
	// earlier store carried.
	ReasonSplitPairRefused Reason = "split_pair_refused"
	// store_keeps_split_pairs: such messages were not kept as given (an
	// unanswered call or an unpaired result dropped or changed).
	ReasonSplitPairAltered Reason = "split_pair_altered"
)

// importPage is the fewest messages of a page of caseImport; a page ends
// at the first message after it where no call of the page waits for its
// result, as the host's importer ends its pages.
const importPage = 3

// importPages cuts msgs into pages of at least importPage messages that
// never separate a tool call from its result.
func importPages(msgs []json.RawMessage) [][]json.RawMessage {
	var pages [][]json.RawMessage
	var page []json.RawMessage
	open := map[string]bool{}
	for _, m := range msgs {
		if len(page) >= importPage && len(open) == 0 {
			pages = append(pages, page)
			page = nil
		}
		page = append(page, m)
		var msg abi.Message
		_ = json.Unmarshal(m, &msg)
		for _, id := range msg.CallIDs() {
			open[id] = true
		}
		for _, id := range msg.ResultIDs() {
			delete(open, id)
		}
	}
	return append(pages, page)
}

// inRunIfAny runs f in a committed run when s can group calls in one, as
// an importer's calls are, and as it is otherwise.
func inRunIfAny(ctx context.Context, s Subject, f func(ctx context.Context) error) error {
	if r, ok := s.(RunSubject); ok {
		return r.InRun(ctx, true, f)
	}
	return f(ctx)
}

func caseImport(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	// 15 messages, two tool calls with their results among them.
	history := stored(script("import", 5))
	pages := importPages(history)
	sl := newSlot(s, newSessionID(), "history")
	err = inRunIfAny(ctx, s, func(ctx context.Context) error {
		first := 0
		for _, page := range pages {
			if err := sl.store(ctx, s, turn{request: page}); err != nil {
				return because(ReasonImportRefused, fmt.Errorf("store of messages %d to %d as request messages, as an importer sends them: %w", first, first+len(page)-1, err))
			}
			first += len(page)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, on := range []string{"the instance that imported it", "a new instance"} {
		if on == "a new instance" {
			if s, err = newSubject(ctx, f); err != nil {
				return err
			}
		}
		got, err := sl.provide(ctx, s)
		if err != nil {
			return err
		}
		if err := sameMessages(got, history); err != nil {
			return because(ReasonImportDiffers, fmt.Errorf("provide on %s after an import in %d pages of request messages: %w", on, len(pages), err))
		}
	}
	return nil
}

// splitStores are stores whose messages split tool calls from their
// results: per-service-call persistence stores a model call's tool call,
// and the next model call's store starts with its result; an importer's
// pages may put a result first when the page before ended with its call's
// turn.
func splitStores(tag string) []turn {
	call := func(n int) json.RawMessage { return toolCall(fmt.Sprintf("%s-call-%d", tag, n), "clock") }
	result := func(n int) json.RawMessage {
		return toolResult(fmt.Sprintf("%s-call-%d", tag, n), fmt.Sprintf("%s: %d o'clock %s", tag, n, edgeText[n%len(edgeText)]))
	}
	return []turn{
		{request: []json.RawMessage{textMessage(abi.RoleSystem, tag+": be brief"), textMessage(abi.RoleUser, tag+": what time is it? "+edgeText[0])},
			response: []json.RawMessage{call(1)}},
		{request: []json.RawMessage{result(1)},
			response: []json.RawMessage{textMessage(abi.RoleAssistant, tag+": one o'clock "+edgeText[1])}},
		{request: []json.RawMessage{textMessage(abi.RoleUser, tag+": and now? "+edgeText[2]), call(2)}},
		{request: []json.RawMessage{result(2), textMessage(abi.RoleAssistant, tag+": two o'clock")}},
	}
}

func caseSplitPairs(ctx context.Context, f Factory) error {
	s, err := newSubject(ctx, f)
	if err != nil {
		return err
	}
	stores := splitStores("pairs")
	sl := newSlot(s, newSessionID(), "history")
	for i, t := range stores {
		err := inRunIfAny(ctx, s, func(ctx context.Context) error { return sl.store(ctx, s, t) })
		if err != nil {
			return because(ReasonSplitPairRefused, fmt.Errorf("store %d of %d (%s): %w", i+1, len(stores), splitWhy[i], err))
		}
		got, err := sl.provide(ctx, s)
		if err != nil {
			return err
		}
		if err := sameMessages(got, stored(stores[:i+1])); err != nil {
			return because(ReasonSplitPairAltered, fmt.Errorf("provide after store %d of %d (%s): %w", i+1, len(stores), splitWhy[i], err))
		}
	}
	return nil
}

// splitWhy says how each of splitStores splits a pair.
var splitWhy = []string{
	"its response ends with a tool call whose result is not stored yet",
	"its request starts with the result of a call an earlier store carried",
	"request messages only, ending with a tool call",
	"request messages only, starting with the result of the call the store before ended with",
}
