package conversation

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// ErrNoSuchTurn: Fork was asked to keep more turns than a slot's history
// has. Nothing was written.
var ErrNoSuchTurn = errors.New("conversation: the history has fewer turns")

// listPage is how many messages Fork asks the source plugin's list for
// at a time.
const listPage = 256

// Fork writes a new, independent session newID into to: the history of
// each slot of src up to turn at, read from the source plugins (from, by
// state key) through their list export, page by page, and written as
// Import writes, all or nothing.
//
// A turn is one input with everything its run added: it starts at a user
// or system message that answers no tool call and follows a message that
// is not such an input. Turns count from 1; at keeps the first at turns of
// every slot, and at = 0 keeps them all. A turn boundary never falls
// between a tool call and its result, since a run stores the answers to
// its calls before the next run's input.
//
// The branch shares nothing with its parent: its slots are fresh states
// of the target plugins (a database plugin gives them rows of their own,
// under new keys), its provenance is the target's, recorded for newID, and
// it starts at revision 1 with no run records and no service conversation
// (the service's copy of the conversation is the parent's). The parent's
// open tool calls come along only when the whole history does (at = 0).
// The source and the target may be the same plugins and store. The
// source is read as list pages it, outside the fork's transaction: a run
// that commits on the source meanwhile (every commit appends whole) may
// be in a fork with at = 0 entirely, never in part.
func Fork(ctx context.Context, src *session.Session, from map[string]*host.Plugin, at int, to Target, newID string) (*session.Session, error) {
	switch {
	case src == nil:
		return nil, fmt.Errorf("%w: fork of a nil session", ErrInvalidTarget)
	case newID == "":
		return nil, fmt.Errorf("%w: fork of session %q: the new session needs an id", ErrInvalidTarget, src.SessionID)
	case at < 0:
		return nil, fmt.Errorf("%w: fork of session %q at turn %d: turns count from 1, and 0 keeps them all", ErrInvalidTarget, src.SessionID, at)
	}
	keys := make([]string, 0, len(src.State))
	for k := range src.State {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slots := make([]SlotHistory, len(keys))
	whole := true
	for i, key := range keys {
		p := from[key]
		if p == nil {
			return nil, fmt.Errorf("%w: fork of session %q: slot %q: give a source plugin for it", ErrNoPlugin, src.SessionID, key)
		}
		slots[i] = SlotHistory{Key: key, History: turnsOf(ctx, p, src, key, at, &whole)}
	}
	fields := &session.Session{SessionID: newID}
	return importAll(ctx, fields, slots, to, nil, func(next *session.Session) {
		if whole {
			next.PendingToolCalls = slices.Clone(src.PendingToolCalls)
		}
	})
}

// turnsOf yields the first at turns (all when at is 0) of the history src
// keeps under key, reading p's list page by page. It clears *whole when it
// leaves messages out.
func turnsOf(ctx context.Context, p *host.Plugin, src *session.Session, key string, at int, whole *bool) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		turns := 0
		prevInput := false
		// The source is read outside the import's transaction: a read
		// leaves nothing to commit.
		for page, err := range p.Pages(ctx, src, key, listPage) {
			if err != nil {
				yield(abi.Message{}, fmt.Errorf("conversation: fork: listing slot %q of session %q: %w", key, src.SessionID, err))
				return
			}
			for _, m := range page {
				in := isInput(m)
				if in && !prevInput {
					turns++
					if at > 0 && turns > at {
						*whole = false
						return
					}
				}
				prevInput = in
				if !yield(m, nil) {
					return
				}
			}
		}
		if at > turns {
			yield(abi.Message{}, fmt.Errorf("%w: slot %q of session %q has %d, not %d: fork at a turn from 1 to %d, or 0 for all",
				ErrNoSuchTurn, key, src.SessionID, turns, at, turns))
		}
	}
}
