package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wasmhist/wasmhist/host/session"
)

// ProvenanceReporter is an optional interface of a HistoryProvider: one
// that can say which build of which plugin it is and which storage it was
// granted. host.Provider implements it. The agent records the answer in
// Session.Provenance at every commit, and refuses to resume a slot that
// another plugin or another build wrote, or, for a provider without
// StorageReporter, another storage (ErrProviderMismatch). A provider
// without it (a native Go provider) records nothing and is never refused.
type ProvenanceReporter interface {
	// Provenance is where the provider keeps history for calls made with
	// ctx. It must not contain a secret: it is written into the session.
	Provenance(ctx context.Context) (session.Provenance, error)
}

// StorageReporter is an optional interface of a ProvenanceReporter whose
// provenance names storage: it says what that storage holds of a session.
// host.Provider implements it. With it, a session's storage is identified
// by content: a session moved, copied or restored together with its
// database resumes wherever they are, and a database that does not hold
// the session at the revision the session recorded is refused.
type StorageReporter interface {
	// HeldRevisions returns, by the storage names of Provenance, the
	// newest revision of session id each storage records (0: none).
	HeldRevisions(ctx context.Context, sessionID string) (map[string]int64, error)
}

// ErrProviderMismatch reports a run refused before any model call because
// a slot of its session was written by another plugin or another build of
// the plugin, or its history is not where the run's provider keeps it:
// another storage, for a provider that cannot say what its storage holds,
// or a database that does not hold the session at the revision the
// session recorded. The error is a *ProviderMismatchError saying what
// differs.
var ErrProviderMismatch = errors.New("agent: the session's history was written by another plugin build or storage")

// ProviderMismatchError is the ErrProviderMismatch of one slot.
type ProviderMismatchError struct {
	// StateKey is the slot.
	StateKey string
	// Field is what differs: "plugin", "version", "sha256", "storage";
	// "database" when the granted database does not hold the session at the
	// revision the session recorded (it never held it, or was restored from
	// an older copy); or "session" when the session is a copy, under another
	// id, of the session whose rows the storage holds.
	Field string
	// Recorded is what the session records for the slot; Current is what
	// the run's provider reports.
	Recorded, Current session.Provenance
	// Held is, for Field "database", the revision of the session the
	// granted database holds (0: nothing of it); the session recorded
	// Recorded.Revision.
	Held int64
}

// Error says what differs, old and new, and how to proceed.
func (e *ProviderMismatchError) Error() string {
	old, cur := e.value(e.Recorded), e.value(e.Current)
	switch e.Field {
	case "storage":
		return fmt.Sprintf("agent: session slot %q keeps its history in %s, but the provider is granted %s: grant it the storage that holds the history again, or move the data there first; a change of storage is never accepted as an upgrade",
			e.StateKey, old, cur)
	case "plugin":
		return fmt.Sprintf("agent: session slot %q was written by plugin %s, not %s: run it with plugin %s, or start a new session",
			e.StateKey, old, cur, old)
	case "database":
		return e.databaseError()
	case "session":
		return fmt.Sprintf("agent: session %q is a copy of session %q, whose history (slot %q) is in %s: the copy would write into the same rows; run %q itself, or fork it (conversation.Fork) for a copy with rows of its own",
			cur, old, e.StateKey, e.Recorded.Storage, old)
	}
	return fmt.Sprintf("agent: session slot %q was written by another build of plugin %s: %s %s then, %s now: run the build that wrote it, or accept this build explicitly (RunOptions.AcceptNewBuild: its migrate_state runs if the state version changed, and the new build is recorded)",
		e.StateKey, e.Recorded.Plugin, e.Field, old, cur)
}

func (e *ProviderMismatchError) databaseError() string {
	id, where, want := e.Current.Session, e.Current.Storage, e.Recorded.Revision
	if e.Held == 0 {
		return fmt.Sprintf("agent: session %q (slot %q): %s holds none of its history, which it recorded in %s at revision %d: grant the database the session was used with, or a copy of it taken with the session",
			id, e.StateKey, where, e.Recorded.Storage, want)
	}
	return fmt.Sprintf("agent: session %q (slot %q): %s holds its history at revision %d, older than the session's %d: the database was restored from an older copy; restore the copy taken with the session, or the session from revision %d",
		id, e.StateKey, where, e.Held, want, e.Held)
}

func (e *ProviderMismatchError) value(p session.Provenance) string {
	var v string
	switch e.Field {
	case "storage":
		v = p.Storage
		if v == "" {
			return "no storage (the session itself)"
		}
	case "plugin":
		v = p.Plugin
	case "session":
		v = p.Session
	case "version":
		v = p.Version
	case "sha256":
		v = p.SHA256
	}
	if v == "" {
		return "(none)"
	}
	return v
}

// Is makes errors.Is(err, ErrProviderMismatch) hold.
func (e *ProviderMismatchError) Is(target error) bool { return target == ErrProviderMismatch }

// BuildChanged reports whether only the plugin's build differs, which
// RunOptions.AcceptNewBuild accepts.
func (e *ProviderMismatchError) BuildChanged() bool {
	return e.Field == "version" || e.Field == "sha256"
}

// compareProvenance returns the first difference between what a slot
// records and what its provider reports, or nil.
func compareProvenance(key string, old, cur session.Provenance) *ProviderMismatchError {
	e := &ProviderMismatchError{StateKey: key, Recorded: old, Current: cur}
	switch {
	case old.Plugin != cur.Plugin:
		e.Field = "plugin"
	case old.Storage != cur.Storage:
		e.Field = "storage"
	case old.Session != "" && old.Session != cur.Session:
		e.Field = "session"
	case old.SHA256 != cur.SHA256:
		e.Field = "sha256"
	case old.Version != cur.Version:
		e.Field = "version"
	default:
		return nil
	}
	return e
}

// checkProvenance runs before anything of a run touches a provider: it
// refuses a session a provider did not write (see ProvenanceReporter),
// unless only the build differs and acceptNewBuild, and records every
// reporting provider's provenance in the working session, so that each
// commit of the run carries it. A slot with nothing stored yet is not
// checked.
func (r *run) checkProvenance(ctx context.Context, acceptNewBuild bool) error {
	for _, pc := range r.a.cfg.Providers {
		rep, ok := pc.Provider.(ProvenanceReporter)
		if !ok {
			continue
		}
		key := pc.Provider.StateKey()
		cur, err := rep.Provenance(ctx)
		if err != nil {
			return fmt.Errorf("agent: provenance of %q: %w", key, err)
		}
		if cur.Storage != "" {
			cur.Session = r.work.SessionID
		}
		old, recorded := r.work.Provenance[key]
		_, stored := r.work.State[key]
		if recorded && stored {
			if err := r.checkSlot(ctx, pc.Provider, key, old, &cur, acceptNewBuild); err != nil {
				return err
			}
		}
		if !recorded || old != cur {
			r.work.SetProvenance(key, cur)
		}
	}
	return nil
}

// checkSlot refuses a slot whose provider is not the one that wrote it
// (see checkProvenance) and, for a slot kept in storage, a storage that
// does not hold the session as the session recorded it; cur takes the
// recorded revision of the storage it accepts.
func (r *run) checkSlot(ctx context.Context, p HistoryProvider, key string, old session.Provenance, cur *session.Provenance, acceptNewBuild bool) error {
	e := compareProvenance(key, old, *cur)
	if e != nil && e.Field != "storage" && !e.BuildChanged() {
		return e // another plugin, or a copy of the session
	}
	if old.Storage != "" && cur.Storage != "" && (old.Storage != cur.Storage || old.Revision > 0) {
		held, err := r.checkHeld(ctx, p, key, old, *cur)
		if err != nil {
			return err
		}
		if held != nil {
			return held
		}
		if old.Storage != cur.Storage {
			r.a.log.Info("agent: the session's storage moved; it holds the session, which resumes there",
				"session", r.work.SessionID, "slot", key, "from", old.Storage, "to", cur.Storage)
			moved := old
			moved.Storage = cur.Storage
			e = compareProvenance(key, moved, *cur)
		}
	}
	if e != nil && !(acceptNewBuild && e.BuildChanged()) {
		return e
	}
	cur.Revision = old.Revision
	return nil
}

// checkHeld compares what the storage cur names holds of the session with
// the revision old recorded. A storage holding it at that revision (or
// later: the session store is behind it, which the commit repairs) is the
// session's, wherever it is. A storage holding it at an older revision, or not at all, is refused. A
// session recorded before the revision was recorded (old.Revision 0) is
// checked against its own revision when its storage moved.
func (r *run) checkHeld(ctx context.Context, p HistoryProvider, key string, old, cur session.Provenance) (*ProviderMismatchError, error) {
	sr, ok := p.(StorageReporter)
	if !ok {
		if old.Storage != cur.Storage {
			return &ProviderMismatchError{StateKey: key, Field: "storage", Recorded: old, Current: cur}, nil
		}
		return nil, nil
	}
	want := old.Revision
	if want == 0 {
		want = r.work.Revision
	}
	held, err := sr.HeldRevisions(ctx, r.work.SessionID)
	if err != nil {
		return nil, fmt.Errorf("agent: provenance of %q: %w", key, err)
	}
	for _, target := range strings.Fields(cur.Storage) {
		if got := held[target]; got < want {
			rec := old
			rec.Revision = want
			return &ProviderMismatchError{StateKey: key, Field: "database", Recorded: rec, Current: cur, Held: got}, nil
		}
	}
	return nil, nil
}
