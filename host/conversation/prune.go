package conversation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// Prune erases (Erase) every session of st last committed before
// olderThan, by the store's clock (store.Info.Updated), with everything
// its plugins keep for it, and returns what it removed, by session id.
//
// A session committed again between the listing and its erasure is
// younger than olderThan now, and is kept: Erase deletes at the revision
// listed. Prune stops at the first session it cannot erase, with an error
// naming it; the sessions erased before it are returned with the error,
// and running Prune again goes on from there.
func Prune(ctx context.Context, st store.Manager, olderThan time.Time, plugins PluginSet) ([]*Erased, error) {
	if st == nil || plugins == nil {
		return nil, fmt.Errorf("%w: prune needs a session store and its plugins", ErrInvalidTarget)
	}
	infos, err := st.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("conversation: prune: listing the sessions: %w", err)
	}
	var erased []*Erased
	for _, info := range infos {
		if !info.Updated.Before(olderThan) {
			continue
		}
		e, err := pruneOne(ctx, st, info, plugins)
		if err != nil {
			return erased, fmt.Errorf("conversation: prune: %w", err)
		}
		if e != nil {
			erased = append(erased, e)
		}
	}
	return erased, nil
}

// pruneOne erases the session info lists, unless it changed since.
func pruneOne(ctx context.Context, st store.Manager, info store.Info, plugins PluginSet) (*Erased, error) {
	s, err := st.Load(ctx, info.SessionID)
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil // deleted since List
	}
	if err != nil {
		return nil, fmt.Errorf("session %q: %w", info.SessionID, err)
	}
	if s.Revision != info.Revision {
		return nil, nil // committed since List: no longer old
	}
	ps, err := plugins.For(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("session %q: its plugins: %w", info.SessionID, err)
	}
	e, err := Erase(ctx, s, ps, st, nil)
	if errors.Is(err, session.ErrStaleRevision) {
		return nil, nil
	}
	return e, err
}
