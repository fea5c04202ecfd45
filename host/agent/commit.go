package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
)

// TxnSaver is a SessionSaver that takes part in a run's commit when the
// run's plugins wrote to databases (see package txn and the commit protocol
// in persistence.md). Every store of this module implements it; a
// SessionSaver that does not is saved before the databases commit, which
// leaves a window (see persistence.md).
type TxnSaver interface {
	SessionSaver
	// PrepareSave stages s for the commit of tx. A store whose database
	// holds one of tx's open transactions writes its row into that
	// transaction, which then commits it; any other store checks the
	// revision (an error wrapping ErrStaleRevision if stale) and holds what
	// keeps the check true (a lock) until Commit or Abort. Target names the
	// transaction the row went into, or is "".
	PrepareSave(ctx context.Context, tx *txn.Txn, s *session.Session) (PreparedSave, error)
}

// PreparedSave is a staged session save.
type PreparedSave interface {
	// Target is the txn target the row was written into, or "" when the
	// save completes in Commit.
	Target() string
	// Commit completes the save, after the run's databases committed.
	Commit(ctx context.Context) error
	// Abort drops it.
	Abort()
}

// StagedSave is a PreparedSave built from its parts, for stores: Into is
// the target a row was written into ("" when the save completes in
// Commit); nil functions do nothing.
type StagedSave struct {
	Into     string
	OnCommit func(ctx context.Context) error
	OnAbort  func()
}

// Target implements PreparedSave.
func (s *StagedSave) Target() string { return s.Into }

// Commit implements PreparedSave.
func (s *StagedSave) Commit(ctx context.Context) error {
	if s.OnCommit == nil {
		return nil
	}
	return s.OnCommit(ctx)
}

// Abort implements PreparedSave.
func (s *StagedSave) Abort() {
	if s.OnAbort != nil {
		s.OnAbort()
	}
}

// CommitStep names a point of a run's commit, for fault injection.
type CommitStep string

// The steps of a commit, in order.
const (
	StepBeforeSessionSave CommitStep = "before-session-save" // the plugins stored; nothing staged
	StepAfterSessionSave  CommitStep = "after-session-save"  // the session row or file is staged
	StepBeforeSQLCommit   CommitStep = "before-sql-commit"   // before a database's COMMIT
	StepAfterSQLCommit    CommitStep = "after-sql-commit"    // after it
	StepBeforeSessionDone CommitStep = "before-session-done" // the databases committed; the session store not yet
	StepAfterSessionDone  CommitStep = "after-session-done"  // everything committed
)

// commitHook, when set (by tests), is called at each step; an error stops
// the commit there, as a crash at that point would, except that the
// process lives on to report.
var commitHook func(CommitStep) error

func hook(step CommitStep) error {
	if commitHook == nil {
		return nil
	}
	if err := commitHook(step); err != nil {
		return fmt.Errorf("agent: commit: injected fault at %s: %w", step, err)
	}
	return nil
}

// saveSession commits next: the plugin databases' open transactions in
// r.txn, and the session through the saver, as one commit.
//
// When the saver's database is one of them, the session row goes into its
// transaction and everything commits at once. Otherwise every database the
// run wrote gets a journal row (the session, with its revision, refused if
// a newer one is there) and the databases commit first: from then on the
// run is committed, and the session store, locked and checked beforehand,
// follows. If the process dies between the two, the next run's journal
// write finds the newer row and brings the store up to date (see repair).
func (r *run) saveSession(ctx context.Context, next *session.Session) error {
	saver := r.a.cfg.Saver
	targets := r.txn.Targets()
	if err := hook(StepBeforeSessionSave); err != nil {
		return err
	}
	if len(targets) == 0 {
		if saver == nil {
			return hook(StepAfterSessionDone)
		}
		if err := saver.Save(ctx, next); err != nil {
			return err
		}
		if err := hook(StepAfterSessionSave); err != nil {
			return err
		}
		return hook(StepAfterSessionDone)
	}
	data, err := session.Encode(next)
	if err != nil {
		return err
	}
	var prep PreparedSave
	switch ts := saver.(type) {
	case nil:
	case TxnSaver:
		if prep, err = ts.PrepareSave(ctx, r.txn, next); err != nil {
			return err
		}
	default:
		// A saver that cannot stage: save first, so a refused save
		// leaves the databases untouched.
		if err := saver.Save(ctx, next); err != nil {
			return err
		}
	}
	abort := func() {
		if prep != nil {
			prep.Abort()
		}
	}
	if err := hook(StepAfterSessionSave); err != nil {
		abort()
		return err
	}
	for _, target := range targets {
		if prep != nil && prep.Target() == target {
			continue
		}
		if err := r.txn.Put(ctx, target, txn.Journal, next.SessionID, next.Revision, data); err != nil {
			if errors.Is(err, txn.ErrStale) && r.a.cfg.Saver != nil {
				err = r.repair(ctx, target, next, err, abort)
			}
			if err != nil {
				abort()
				return err
			}
		}
	}
	r.txn.OnEvent(func(e txn.Event, target string) error {
		if e == txn.BeforeCommit {
			return hook(StepBeforeSQLCommit)
		}
		return hook(StepAfterSQLCommit)
	})
	if err := r.txn.Commit(ctx); err != nil {
		abort()
		var ce *txn.CommitError
		if errors.As(err, &ce) && len(ce.Committed) > 0 {
			return fmt.Errorf("%w (the databases %v committed; their journal brings the session store up to date on the next run)", err, ce.Committed)
		}
		return err
	}
	if err := hook(StepBeforeSessionDone); err != nil {
		abort()
		return nil // the run committed with the databases; see above
	}
	if prep != nil {
		if err := prep.Commit(ctx); err != nil {
			// The run is committed: its databases hold it, journal
			// included. Failing it now would make the caller repeat a
			// turn that is stored.
			r.a.log.Warn("agent: the run committed in its databases but the session store was not updated; the next run brings it up to date from their journal",
				"session", next.SessionID, "revision", next.Revision, "error", err)
			return nil
		}
	}
	return hook(StepAfterSessionDone)
}

// repair handles a journal row not older than the run's session: a run of
// another host or process committed to the database and its session save
// did not land (the process died between the two), or has not landed yet.
// If the store is behind the journal (or has no such session: the first
// save never landed), the journal's session is saved to it and the run is
// refused as stale, to be run again from the session now stored; else the
// journal is a concurrent run's, and this one is stale.
//
// Deleting a session must therefore delete its journal rows too, or the
// next run of a session created again under the same id would restore the
// deleted one: wasmhist session delete clears the plugins' data and the
// journal row in one transaction.
func (r *run) repair(ctx context.Context, target string, next *session.Session, stale error, abort func()) error {
	staleErr := fmt.Errorf("%w: %w", ErrStaleRevision, stale)
	var storedRev int64
	switch stored, err := r.loadStored(ctx, next.SessionID); {
	case errors.Is(err, ErrSessionNotFound):
	case err != nil:
		return staleErr
	default:
		storedRev = stored.Revision
	}
	rev, jdata, err := r.txn.Get(ctx, target, txn.Journal, next.SessionID)
	if err != nil || rev <= storedRev {
		// The store is not behind the journal: a concurrent run.
		return staleErr
	}
	js, derr := session.Decode(jdata)
	if derr != nil || js.SessionID != next.SessionID || js.Revision != rev {
		return fmt.Errorf("%w; and the journal row in %s is not a valid session: %v", staleErr, target, derr)
	}
	abort()
	r.txn.Rollback(ctx)
	switch err := r.a.cfg.Saver.Save(ctx, js); {
	case err == nil:
		r.a.log.Warn("agent: the session store was behind a database's journal and was brought up to date; the run was not committed",
			"session", next.SessionID, "database", target, "revision", rev)
		return fmt.Errorf("agent: session %q: the session store was at revision %d and database %s at %d; the store was brought up to date, run again: %w",
			next.SessionID, storedRev, target, rev, ErrStaleRevision)
	case errors.Is(err, ErrStaleRevision):
		return staleErr
	default:
		return fmt.Errorf("agent: session %q: the session store is behind database %s (revision %d) and could not be brought up to date: %w",
			next.SessionID, target, rev, err)
	}
}

// loadStored reads the saver's copy of a session, if the saver can read.
func (r *run) loadStored(ctx context.Context, id string) (*session.Session, error) {
	switch s := r.a.cfg.Saver.(type) {
	case SessionStore:
		return s.Load(ctx, id)
	case *SessionFile:
		stored, err := s.Load(ctx)
		if err == nil && stored.SessionID != id {
			return nil, fmt.Errorf("agent: session file %s holds session %q, not %q: %w", s.Path(), stored.SessionID, id, ErrSessionNotFound)
		}
		return stored, err
	}
	return nil, errors.New("agent: the session saver cannot load")
}
