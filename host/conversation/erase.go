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

// EraseOptions tune Erase; nil is the common case.
type EraseOptions struct {
	// Leave decides about each slot Erase cannot clear: its plugin is not
	// in plugins (Uncleared.Err wraps ErrNoPlugin) or does not implement
	// clear (Err wraps host.ErrUnsupported). True leaves what the slot's
	// plugin stored, if anything, and erases the rest; false refuses the
	// erase, changing nothing, with ErrNoPlugin or ErrCannotErase. A nil
	// Leave leaves only a slot whose plugin is given and keeps the history
	// in the session itself (no Storage), which the delete removes.
	Leave func(Uncleared) bool
}

// Uncleared is a slot Erase cannot clear, as EraseOptions.Leave sees it.
type Uncleared struct {
	Key string
	// Plugin is the plugin that wrote the slot.
	Plugin string
	// Storage is where the slot's history is kept (its recorded
	// provenance); empty when it is kept in the session itself.
	Storage string
	Err     error
}

// Erase deletes session s with everything its plugins keep for it and
// returns what it removed. plugins holds the plugin of every slot of s, by
// state key, granted the storage the slot records. st is the session's
// store: a store.Manager, or the session's *store.File.
//
// Every slot's plugin clears what it stored (its clear export), and the
// session's journal rows in the databases the clears wrote to are
// deleted, all in one transaction per database (txn.Txn): a journal row
// left behind would let the next run of a session under the same id
// bring the deleted one back. The transaction also reads each database's
// journal and session rows of s: a revision above s.Revision means a run
// committed after s was read, and Erase refuses with
// session.ErrStaleRevision, changing nothing. Only once the databases
// have committed is the session deleted from st, at s.Revision, which
// refuses it the same way if the store holds another revision. A slot
// whose plugin is missing (ErrNoPlugin) or cannot clear history it keeps
// in a database (ErrCannotErase) is refused before anything changes,
// unless opts.Leave leaves it; a plugin without clear that keeps the
// history in the session loses it with the session.
//
// If the delete from st fails after the databases committed, the session
// remains with its slots cleared; erasing it again removes it.
func Erase(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, st store.Deleter, opts *EraseOptions) (*Erased, error) {
	if s == nil || s.SessionID == "" {
		return nil, fmt.Errorf("%w: erase of a session without an id", ErrInvalidTarget)
	}
	if st == nil {
		return nil, fmt.Errorf("%w: erase of session %q: no session store", ErrInvalidTarget, s.SessionID)
	}
	leave := func(u Uncleared) bool { return u.Storage == "" && !errors.Is(u.Err, ErrNoPlugin) }
	if opts != nil && opts.Leave != nil {
		leave = opts.Leave
	}
	id := s.SessionID
	keys := slotKeys(s)
	for _, k := range keys {
		if plugins[k] != nil {
			continue
		}
		u := Uncleared{Key: k, Plugin: s.State[k].Provider, Storage: s.Provenance[k].Storage,
			Err: fmt.Errorf("%w: erase of session %q: slot %q (plugin %s): give its plugin, granted the storage it records", ErrNoPlugin, id, k, s.State[k].Provider)}
		if !leave(u) {
			return nil, u.Err
		}
	}
	out := &Erased{SessionID: id, Revision: s.Revision}
	tx := txn.New()
	defer tx.Rollback(ctx)
	tctx := txn.With(ctx, tx)
	work := s.Clone() // Clear records the cleared state; s stays as read
	for _, k := range keys {
		p := plugins[k]
		if p == nil {
			continue // left
		}
		storage := s.Provenance[k].Storage
		err := p.Clear(tctx, work, k)
		switch {
		case errors.Is(err, host.ErrUnsupported):
			u := Uncleared{Key: k, Plugin: p.Info().Name, Storage: storage,
				Err: fmt.Errorf("%w: erase of session %q: slot %q: plugin %s does not clear it (%w): nothing was erased; delete its rows with the plugin's own tools", ErrCannotErase, id, k, p.Info().Name, err)}
			if !leave(u) {
				return nil, u.Err
			}
			if storage != "" {
				continue // its rows remain, as the caller allowed
			}
			// The history is in the session's state: the delete takes it.
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
