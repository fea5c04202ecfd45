package conversation

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// ErrCannotErase: a slot of the session keeps history in storage (its
// provenance names a database) and its plugin has no clear, or does not
// implement it, so its rows there would outlive the session. Nothing was
// erased.
var ErrCannotErase = errors.New("conversation: a slot's stored history cannot be erased")

// Erased is what Erase removed.
type Erased struct {
	SessionID string
	// Revision is the revision of the session that was deleted.
	Revision int64
	// Slots are the session's slots, each cleared by its plugin.
	Slots []ErasedSlot
	// Journals are the databases (txn targets, "sqlite:/abs/path" or
	// "postgres:NAME") whose journal row of the session was deleted.
	Journals []string
}

// ErasedSlot is one slot Erase cleared.
type ErasedSlot struct {
	Key    string
	Plugin string
	// Storage is where the plugin kept the slot's history (the slot's
	// recorded provenance); empty for a plugin that keeps it in the
	// session itself, which the store's delete removes.
	Storage string
}

// Erase deletes session s with everything its plugins keep for it and
// returns what it removed. plugins holds the plugin of every slot of s, by
// state key, granted the storage the slot records.
//
// Every slot's plugin clears what it stored (its clear export), and the
// session's journal rows in the databases the clears wrote to are
// deleted, all in one transaction per database (txn.Txn): a journal row
// left behind would let the next run of a session under the same id
// bring the deleted one back. The transaction also reads each database's
// journal and session rows of s: a revision above s.Revision means a run
// committed after s was read, and Erase refuses with
// session.ErrStaleRevision, changing nothing. Only once the databases
// have committed is the session deleted from st, at s.Revision. A slot
// whose plugin is missing (ErrNoPlugin) or cannot clear history it keeps
// in a database (ErrCannotErase) is refused before anything changes; a
// plugin without clear that keeps the history in the session loses it
// with the session.
//
// If the delete from st fails after the databases committed, the session
// remains with its slots cleared; erasing it again removes it.
func Erase(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, st store.Manager) (*Erased, error) {
	if s == nil || s.SessionID == "" {
		return nil, fmt.Errorf("%w: erase of a session without an id", ErrInvalidTarget)
	}
	if st == nil {
		return nil, fmt.Errorf("%w: erase of session %q: no session store", ErrInvalidTarget, s.SessionID)
	}
	id := s.SessionID
	keys := slotKeys(s)
	for _, k := range keys {
		if plugins[k] == nil {
			return nil, fmt.Errorf("%w: erase of session %q: slot %q (plugin %s): give its plugin, granted the storage it records",
				ErrNoPlugin, id, k, s.State[k].Provider)
		}
	}
	out := &Erased{SessionID: id, Revision: s.Revision}
	tx := txn.New()
	defer tx.Rollback(ctx)
	tctx := txn.With(ctx, tx)
	work := s.Clone() // Clear records the cleared state; s stays as read
	for _, k := range keys {
		p := plugins[k]
		storage := s.Provenance[k].Storage
		err := p.Clear(tctx, work, k)
		switch {
		case errors.Is(err, host.ErrUnsupported) && storage == "":
			// The history is in the session's state: the delete takes it.
		case errors.Is(err, host.ErrUnsupported):
			return nil, fmt.Errorf("%w: erase of session %q: slot %q: plugin %s keeps it in %s and does not clear it (%v): nothing was erased; delete the rows with the plugin's own tools",
				ErrCannotErase, id, k, p.Info().Name, storage, err)
		case err != nil:
			return nil, fmt.Errorf("conversation: erase of session %q: clearing slot %q through plugin %s: %w: nothing was erased", id, k, p.Info().Name, err)
		}
		out.Slots = append(out.Slots, ErasedSlot{Key: k, Plugin: p.Info().Name, Storage: storage})
	}
	for _, target := range tx.Targets() {
		for _, tab := range []txn.Table{txn.Journal, txn.Sessions} {
			rev, _, err := tx.Get(ctx, target, tab, id)
			switch {
			case errors.Is(err, txn.ErrNotFound):
			case err != nil:
				return nil, fmt.Errorf("conversation: erase of session %q: reading its %s row in %s: %w: nothing was erased", id, tab, target, err)
			case rev > s.Revision:
				return nil, fmt.Errorf("conversation: erase of session %q at revision %d: %s holds revision %d, committed since: %w: nothing was erased; read the session again",
					id, s.Revision, target, rev, session.ErrStaleRevision)
			}
		}
		if err := tx.Delete(ctx, target, txn.Journal, id); err != nil {
			return nil, fmt.Errorf("conversation: erase of session %q: deleting its journal row in %s: %w: nothing was erased", id, target, err)
		}
		out.Journals = append(out.Journals, target)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("conversation: erase of session %q: %w: check the database; what committed is named, the rest was rolled back", id, err)
	}
	if err := st.Delete(ctx, id, s.Revision); err != nil {
		return nil, fmt.Errorf("conversation: erase of session %q: its slots were cleared, but deleting it from the store failed: %w: erase it again", id, err)
	}
	return out, nil
}

// slotKeys returns the state keys of s in order.
func slotKeys(s *session.Session) []string {
	keys := make([]string, 0, len(s.State))
	for k := range s.State {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
