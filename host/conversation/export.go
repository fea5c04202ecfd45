package conversation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
)

// ErrChanged: the storage of a slot held another revision of the session
// than the session being exported records (a run committed while the
// export read). Load the session again and export again.
var ErrChanged = errors.New("conversation: the session changed during the export")

// ErrBehind: the database a slot's plugin reads holds an older revision of
// the session than the session records for the slot, or none of it: the
// database was restored from an older copy than the session, or is
// another database. A run refuses such a session too
// (agent.ErrProviderMismatch, field "database"). Give the plugin the
// database the session was chatted with, or the copy taken with it.
var ErrBehind = errors.New("conversation: the database does not hold the session as last saved")

// Export writes the portable document (package portable) of the newest
// committed revision of session s into out: the session's own fields,
// then every slot, as read from plugins (by state key) through their list
// export page by page. It returns the session the document holds.
//
// That session is s, or a newer revision of it that a slot's storage
// holds: a database the session's slots write into holds, in the host's
// rows, the session of its last commit (a journal row, or the session
// row of a session store in the same database), so when the session store
// is behind it (the process ended between the database's commit and the
// store's save, or a run committed since s was loaded) the document holds
// the revision the database committed, session and history alike. Export
// only reads: the session store stays behind until the next run brings it
// up to date (host/agent/persistence.md).
//
// Every list call of the export runs in one read transaction (host.InRun,
// never committed), so on SQLite all pages of all slots come from one
// snapshot of each database; and what each slot's storage holds of the
// session (Provider.HeldRevisions) is compared with the revision the
// exported session records for it before the first page and after the
// last: a run that commits meanwhile fails the export with ErrChanged
// rather than giving a document whose history belongs to another
// revision than its session, and a storage that holds an older revision
// than the session, or none of it, fails it with ErrBehind. A slot whose storage the session records no
// revision for (a plugin without storage, or a session written before
// revisions were recorded) is read as it is.
//
// On error what was written to out must be discarded: Export checks every
// slot's plugin before writing, so a missing plugin fails before any
// byte, but ErrChanged can be noticed after the last message.
func Export(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, out io.Writer) (*session.Session, error) {
	if s == nil || out == nil {
		return nil, fmt.Errorf("%w: export of a nil session or into a nil writer", ErrInvalidTarget)
	}
	if err := checkPlugins(s, plugins); err != nil {
		return nil, err
	}
	cur, err := Newest(ctx, s, plugins)
	if err != nil {
		return nil, err
	}
	if cur != s {
		if err := checkPlugins(cur, plugins); err != nil {
			return nil, fmt.Errorf("%w: session %q is at revision %d in its database, whose slots differ from revision %d: %w", ErrChanged, s.SessionID, cur.Revision, s.Revision, err)
		}
	}
	keys := slotKeys(cur)
	if err := checkHeld(ctx, cur, plugins, keys); err != nil {
		return nil, err
	}
	w, err := portable.NewWriter(out, cur)
	if err != nil {
		return nil, err
	}
	err = host.InRun(ctx, false, func(ctx context.Context) error {
		for _, k := range keys {
			if err := w.BeginSlot(k); err != nil {
				return err
			}
			if err := exportSlot(ctx, cur, plugins[k], k, w); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := checkHeld(ctx, cur, plugins, keys); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return cur, nil
}

// checkPlugins checks that plugins has the plugin that wrote every slot
// of s.
func checkPlugins(s *session.Session, plugins map[string]*host.Plugin) error {
	for _, k := range slotKeys(s) {
		p := plugins[k]
		if p == nil {
			return fmt.Errorf("%w: export of session %q: slot %q: give a plugin to read it", ErrNoPlugin, s.SessionID, k)
		}
		if name := s.State[k].Provider; p.Info().Name != name {
			return fmt.Errorf("%w: export of session %q: slot %q was written by plugin %s, not %s", ErrNoPlugin, s.SessionID, k, name, p.Info().Name)
		}
	}
	return nil
}

// Newest returns the newest committed revision of session s: the newest
// session that the storage of one of its slots holds in the host's rows
// (Provider.HeldSession) when it is newer than s, else s itself. plugins
// holds the plugins of s's slots, by state key, granted the storage each
// records; a slot without one, or without storage, is skipped. A newer
// revision means the session store s was loaded from is behind a database
// (the process ended between the database's commit and the store's save),
// or a run committed since s was loaded. Newest only reads.
func Newest(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin) (*session.Session, error) {
	cur := s
	for _, k := range slotKeys(s) {
		if s.Provenance[k].Storage == "" || plugins[k] == nil {
			continue
		}
		held, _, err := plugins[k].Provider(k).HeldSession(ctx, s.SessionID)
		if err != nil {
			return nil, fmt.Errorf("conversation: session %q: slot %q: %w", s.SessionID, k, err)
		}
		if held != nil && held.Revision > cur.Revision {
			cur = held
		}
	}
	return cur, nil
}

// exportSlot writes the history p keeps for s under key into w.
func exportSlot(ctx context.Context, s *session.Session, p *host.Plugin, key string, w *portable.Writer) error {
	for page, err := range p.Pages(ctx, s, key, listPage) {
		if err != nil {
			return fmt.Errorf("conversation: export of session %q: listing slot %q through plugin %s: %w", s.SessionID, key, p.Info().Name, err)
		}
		for _, m := range page {
			if err := w.WriteMessage(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckHeld reports whether the database each slot's plugin reads holds
// the session s at the revision s records for the slot, or a later one: nil,
// or an error wrapping ErrBehind that names the slot, the database and both
// revisions. A later revision is not an error: s was read before a run
// committed, or saved behind its database, which the next run repairs
// (Newest reads that revision). plugins are by state key; a slot without
// one, or whose provenance records no database or revision, is not
// checked. It is the check a run makes of its storage before its first
// model call, for a command that reads a session without running it.
func CheckHeld(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin) error {
	return checkHeldRevisions(ctx, s, plugins, slotKeys(s), false)
}

// checkHeld is CheckHeld for an export, for which a later revision fails
// with ErrChanged: a run committed while the export read.
func checkHeld(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, keys []string) error {
	return checkHeldRevisions(ctx, s, plugins, keys, true)
}

func checkHeldRevisions(ctx context.Context, s *session.Session, plugins map[string]*host.Plugin, keys []string, exact bool) error {
	for _, k := range keys {
		rec, ok := s.Provenance[k]
		p := plugins[k]
		if !ok || rec.Revision == 0 || rec.Storage == "" || p == nil {
			continue
		}
		held, err := p.Provider(k).HeldRevisions(ctx, s.SessionID)
		if err != nil {
			return fmt.Errorf("conversation: session %q: slot %q: %w", s.SessionID, k, err)
		}
		for _, target := range slices.Sorted(maps.Keys(held)) {
			switch got := held[target]; {
			case got == 0:
				return fmt.Errorf("%w: session %q: slot %q: %s holds none of its history (recorded in %s at revision %d): give the plugin the database the session was chatted with",
					ErrBehind, s.SessionID, k, target, rec.Storage, rec.Revision)
			case got < rec.Revision:
				return fmt.Errorf("%w: session %q: slot %q: %s holds its history at revision %d, the session is at %d: restore the database copy taken with the session",
					ErrBehind, s.SessionID, k, target, got, rec.Revision)
			case got > rec.Revision && exact:
				return fmt.Errorf("%w: slot %q of session %q is at revision %d, %s holds revision %d: load the session again and export again",
					ErrChanged, k, s.SessionID, rec.Revision, target, got)
			}
		}
	}
	return nil
}
