package conversation

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// PluginSet gives the plugins of a session's slots, by state key, granted
// the storage that session's history is in. Plugins is the set that is
// the same for every session; PluginsFunc chooses per session (a
// directory of sessions each with a database of its own).
type PluginSet interface {
	For(ctx context.Context, s *session.Session) (map[string]*host.Plugin, error)
}

// Plugins is a PluginSet with the same plugins for every session.
type Plugins map[string]*host.Plugin

// For implements PluginSet.
func (p Plugins) For(context.Context, *session.Session) (map[string]*host.Plugin, error) {
	return p, nil
}

// PluginsFunc is a PluginSet that chooses the plugins of each session.
type PluginsFunc func(ctx context.Context, s *session.Session) (map[string]*host.Plugin, error)

// For implements PluginSet.
func (f PluginsFunc) For(ctx context.Context, s *session.Session) (map[string]*host.Plugin, error) {
	return f(ctx, s)
}

// Source is where Migrate reads sessions: a store that lists them, and
// the plugins that read each session's history.
type Source struct {
	Store   store.Manager
	Plugins PluginSet
}

// Destination is where Migrate writes them: a store, and the plugins that
// take each session's history (the session's slots by state key).
type Destination struct {
	Store   store.Store
	Plugins PluginSet
	// Log receives the warning of a commit that completed in its
	// databases but not in its store; nil discards it.
	Log *slog.Logger
}

// Outcome is what Migrate did with one session.
type Outcome string

// The outcomes of one session.
const (
	// Copied: the destination did not hold the session; it does now.
	Copied Outcome = "copied"
	// Updated: the destination held an older revision (an earlier
	// migration, before the source went on); it was replaced.
	Updated Outcome = "updated"
	// Unchanged: the destination holds the session at the source's
	// revision already (an earlier, interrupted migration got that far).
	Unchanged Outcome = "unchanged"
	// Diverged: the destination holds a newer revision than the source:
	// it went on after an earlier migration. It is left as it is.
	Diverged Outcome = "diverged"
)

// Migrated is one session Migrate handled.
type Migrated struct {
	SessionID string
	Revision  int64 // the source's revision
	Outcome   Outcome
	// Messages is the number of messages copied (Copied, Updated).
	Messages int
}

// MigrateOptions tune Migrate; nil is the common case.
type MigrateOptions struct {
	// Progress, when set, is called after each session.
	Progress func(Migrated)
}

// Migrate copies every session of from into to with its history and
// returns what it did with each, in the order of the source's List (by id).
//
// Each session is one Import: its slots are read from the source's
// plugins through their list export, page by page, and written into fresh
// states of the destination's plugins and into its store, all or nothing,
// keeping the session's id, revision, service conversation, pending calls,
// run records and compaction records. Migrate is idempotent, so an interrupted migration
// resumes by running it again: a session the destination holds at the
// source's revision is Unchanged, one it holds at an older revision is
// replaced (Updated, Import with Force: the old copy's rows are cleared in
// the same transaction), one it holds at a newer revision is Diverged and
// left alone. The source is only read: delete it once the destination
// serves.
//
// Migrate stops at the first session it cannot copy, with an error naming
// it; the sessions before it are in the destination, the one that failed
// is not there at all (or as it was), and running Migrate again after the
// cause is fixed goes on from there.
func Migrate(ctx context.Context, from Source, to Destination, opts *MigrateOptions) ([]Migrated, error) {
	switch {
	case from.Store == nil || from.Plugins == nil:
		return nil, fmt.Errorf("%w: migrate needs a source store and its plugins", ErrInvalidTarget)
	case to.Store == nil || to.Plugins == nil:
		return nil, fmt.Errorf("%w: migrate needs a destination store and its plugins", ErrInvalidTarget)
	}
	var o MigrateOptions
	if opts != nil {
		o = *opts
	}
	infos, err := from.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("conversation: migrate: listing the source's sessions: %w", err)
	}
	var done []Migrated
	for _, info := range infos {
		m, err := migrateOne(ctx, from, to, info.SessionID)
		if errors.Is(err, session.ErrNotFound) {
			continue // deleted since List
		}
		if err != nil {
			return done, fmt.Errorf("conversation: migrate: session %q (after %d of %d): %w; run the migration again once fixed: it goes on from there",
				info.SessionID, len(done), len(infos), err)
		}
		done = append(done, m)
		if o.Progress != nil {
			o.Progress(m)
		}
	}
	return done, nil
}

func migrateOne(ctx context.Context, from Source, to Destination, id string) (Migrated, error) {
	s, err := from.Store.Load(ctx, id)
	if err != nil {
		return Migrated{}, err
	}
	m := Migrated{SessionID: id, Revision: s.Revision}
	have, err := to.Store.Load(ctx, id)
	switch {
	case errors.Is(err, session.ErrNotFound):
		m.Outcome = Copied
	case err != nil:
		return m, fmt.Errorf("reading the destination: %w", err)
	case have.Revision == s.Revision:
		m.Outcome = Unchanged
		return m, nil
	case have.Revision > s.Revision:
		m.Outcome = Diverged
		return m, nil
	default:
		m.Outcome = Updated
	}
	src, err := from.Plugins.For(ctx, s)
	if err != nil {
		return m, fmt.Errorf("the source's plugins: %w", err)
	}
	dst, err := to.Plugins.For(ctx, s)
	if err != nil {
		return m, fmt.Errorf("the destination's plugins: %w", err)
	}
	keys := slotKeys(s)
	slots := make([]SlotHistory, len(keys))
	for i, k := range keys {
		p := src[k]
		if p == nil {
			return m, fmt.Errorf("%w: slot %q (plugin %s): give the source a plugin for it", ErrNoPlugin, k, s.State[k].Provider)
		}
		slots[i] = SlotHistory{Key: k, History: countOf(turnsOf(ctx, p, s, k, 0, new(bool)), &m.Messages)}
	}
	_, err = Import(ctx, s, slots, Target{Store: to.Store, Plugins: dst, Log: to.Log}, &ImportOptions{Force: m.Outcome == Updated})
	return m, err
}

// countOf counts what seq yields into *n.
func countOf(seq iter.Seq2[abi.Message, error], n *int) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		for m, err := range seq {
			if err == nil {
				*n++
			}
			if !yield(m, err) {
				return
			}
		}
	}
}
