package conversation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
)

// ErrChanged: the storage of a slot held another revision of the session
// than the session being exported records (a run committed while the
// export read, or since the session was loaded). Load the session again
// and export again.
var ErrChanged = errors.New("conversation: the session changed during the export")

// Export writes every slot of s, as read from plugins (by state key)
// through their list export page by page, into w, and closes w: w must be
// the Writer portable.NewWriter opened for s, so the document holds s's
// own fields and then its history.
//
// The history is the one of s's revision. Every list call of the export
// runs in one read transaction (host.InRun, never committed), so on SQLite
// all pages of all slots come from one snapshot of each database; and
// what each slot's storage holds of the session (Provider.HeldRevisions)
// is compared with the revision s records for it before the first page
// and after the last: a run that commits meanwhile, or committed since s
// was loaded, fails the export with ErrChanged rather than giving a
// document whose history belongs to another revision than its session.
// A slot whose storage s records no revision for (a plugin without
// storage, or a session written before revisions were recorded) is read
// as it is.
//
// On error what was written to w must be discarded: Export checks every
// slot's plugin before writing, so a missing plugin fails before any
// message, but ErrChanged can be noticed after the last.
func Export(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, w *portable.Writer) error {
	if s == nil || w == nil {
		return fmt.Errorf("%w: export of a nil session or into a nil Writer", ErrInvalidTarget)
	}
	keys := slotKeys(s)
	for _, k := range keys {
		p := plugins[k]
		if p == nil {
			return fmt.Errorf("%w: export of session %q: slot %q: give a plugin to read it", ErrNoPlugin, s.SessionID, k)
		}
		if name := s.State[k].Provider; p.Info().Name != name {
			return fmt.Errorf("%w: export of session %q: slot %q was written by plugin %s, not %s", ErrNoPlugin, s.SessionID, k, name, p.Info().Name)
		}
	}
	if err := checkHeld(ctx, s, plugins, keys); err != nil {
		return err
	}
	err := host.InRun(ctx, false, func(ctx context.Context) error {
		for _, k := range keys {
			if err := w.BeginSlot(k); err != nil {
				return err
			}
			if err := exportSlot(ctx, s, plugins[k], k, w); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := checkHeld(ctx, s, plugins, keys); err != nil {
		return err
	}
	return w.Close()
}

// exportSlot writes the history p keeps for s under key into w.
func exportSlot(ctx context.Context, s *session.Session, p *host.Plugin, key string, w *portable.Writer) error {
	cursor := ""
	for {
		page, next, err := p.List(ctx, s, key, cursor, listPage)
		if err != nil {
			return fmt.Errorf("conversation: export of session %q: listing slot %q through plugin %s: %w", s.SessionID, key, p.Info().Name, err)
		}
		for _, m := range page {
			if err := w.WriteMessage(m); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		if next == cursor {
			return fmt.Errorf("conversation: export of session %q: plugin %s returned list cursor %q twice", s.SessionID, p.Info().Name, next)
		}
		cursor = next
	}
}

// checkHeld fails with ErrChanged when the storage a slot's plugin reads
// holds another revision of s than s records for the slot.
func checkHeld(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, keys []string) error {
	for _, k := range keys {
		rec, ok := s.Provenance[k]
		if !ok || rec.Revision == 0 || rec.Storage == "" {
			continue
		}
		held, err := plugins[k].Provider(k).HeldRevisions(ctx, s.SessionID)
		if err != nil {
			return fmt.Errorf("conversation: export of session %q: slot %q: %w", s.SessionID, k, err)
		}
		for _, target := range slices.Sorted(maps.Keys(held)) {
			switch got := held[target]; {
			case got == 0:
				return fmt.Errorf("%w: export of session %q: slot %q: %s holds none of its history (recorded in %s at revision %d): give the plugin the database the session was chatted with",
					ErrInvalidTarget, s.SessionID, k, target, rec.Storage, rec.Revision)
			case got != rec.Revision:
				return fmt.Errorf("%w: slot %q of session %q is at revision %d, %s holds revision %d: load the session again and export again",
					ErrChanged, k, s.SessionID, rec.Revision, target, got)
			}
		}
	}
	return nil
}
