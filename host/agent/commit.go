package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// saveSession commits next with the databases the run's plugins wrote, in
// one commit: the protocol is package txn's (host/internal/txn/doc.go).
func (r *run) saveSession(ctx context.Context, next *session.Session) error {
	return r.txn.CommitSession(ctx, next, txn.Store{
		Saver: r.a.cfg.Saver,
		Load:  r.loadStored,
		Log:   r.a.log,
		Fault: r.a.fault,
	})
}

// loadStored reads the saver's copy of a session, if the saver can read.
func (r *run) loadStored(ctx context.Context, id string) (*session.Session, error) {
	switch s := r.a.cfg.Saver.(type) {
	case store.Store:
		return s.Load(ctx, id)
	case *store.File:
		stored, err := s.Load(ctx)
		if err == nil && stored.SessionID != id {
			return nil, fmt.Errorf("agent: session file %s holds session %q, not %q: %w", s.Path(), stored.SessionID, id, session.ErrNotFound)
		}
		return stored, err
	}
	return nil, errors.New("agent: the session saver cannot load")
}
