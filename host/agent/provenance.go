package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/session"
)

// ProvenanceReporter is an optional interface of a HistoryProvider: one
// that can say which build of which plugin it is and which storage it was
// granted. host.Provider implements it. The agent records the answer in
// Session.Provenance at every commit, and refuses to resume a slot that
// another build or another storage wrote (ErrProviderMismatch). A provider
// without it (a native Go provider) records nothing and is never refused.
type ProvenanceReporter interface {
	// Provenance is where the provider keeps history for calls made with
	// ctx. It must not contain a secret: it is written into the session.
	Provenance(ctx context.Context) (session.Provenance, error)
}

// ErrProviderMismatch reports a run refused before any model call because
// a slot of its session was written by another plugin, another build of
// the plugin, or with another storage than the run's provider has. The
// error is a *ProviderMismatchError saying what differs.
var ErrProviderMismatch = errors.New("agent: the session's history was written by another plugin build or storage")

// ProviderMismatchError is the ErrProviderMismatch of one slot.
type ProviderMismatchError struct {
	// StateKey is the slot.
	StateKey string
	// Field is what differs: "plugin", "version", "sha256", "storage", or
	// "session" when the session is a copy, under another id, of the session
	// whose rows the storage holds.
	Field string
	// Recorded is what the session records for the slot; Current is what
	// the run's provider reports.
	Recorded, Current session.Provenance
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
	case "session":
		return fmt.Sprintf("agent: session %q is a copy of session %q, whose history (slot %q) is in %s: the copy would write into the same rows; run %q itself, or fork it (portable.Fork) for a copy with rows of its own",
			cur, old, e.StateKey, e.Recorded.Storage, old)
	}
	return fmt.Sprintf("agent: session slot %q was written by another build of plugin %s: %s %s then, %s now: run the build that wrote it, or accept this build explicitly (RunOptions.AcceptNewBuild: its migrate_state runs if the state version changed, and the new build is recorded)",
		e.StateKey, e.Recorded.Plugin, e.Field, old, cur)
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
			if e := compareProvenance(key, old, cur); e != nil && !(acceptNewBuild && e.BuildChanged()) {
				return e
			}
		}
		if !recorded || old != cur {
			r.work.SetProvenance(key, cur)
		}
	}
	return nil
}
