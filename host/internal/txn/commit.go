package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/host/session"
)

// Saver persists committed sessions: the session store of a run.
type Saver interface {
	Save(ctx context.Context, s *session.Session) error
}

// Stager is a Saver that takes part in a commit of a Txn. Every store of
// this module implements it; a Saver that does not is saved before the
// databases commit, which leaves the window package doc describes.
type Stager interface {
	Saver
	// PrepareSave stages s for the commit of tx. A store whose database
	// holds one of tx's open transactions writes its row into that
	// transaction, which then commits it; any other store checks the
	// revision (an error wrapping session.ErrStaleRevision if stale) and
	// holds what keeps the check true (a lock) until Commit or Abort.
	PrepareSave(ctx context.Context, tx *Txn, s *session.Session) (Prepared, error)
}

// Prepared is a staged session save.
type Prepared interface {
	// Target is the target the row was written into, or "" when the
	// save completes in Commit.
	Target() string
	// Commit completes the save, after the databases committed.
	Commit(ctx context.Context) error
	// Abort drops it.
	Abort()
}

// Staged is a Prepared built from its parts: Into is the target a row was
// written into ("" when the save completes in OnCommit); nil functions do
// nothing.
type Staged struct {
	Into     string
	OnCommit func(ctx context.Context) error
	OnAbort  func()
}

// Target implements Prepared.
func (s *Staged) Target() string { return s.Into }

// Commit implements Prepared.
func (s *Staged) Commit(ctx context.Context) error {
	if s.OnCommit == nil {
		return nil
	}
	return s.OnCommit(ctx)
}

// Abort implements Prepared.
func (s *Staged) Abort() {
	if s.OnAbort != nil {
		s.OnAbort()
	}
}

// StageSession writes next's session row (data, as session.Encode wrote
// it) into t's open transaction on target, when t holds one there (a
// plugin granted that database wrote in the run): the row then commits
// with the plugin's writes, and the returned Prepared says so. It returns
// nil, nil when t holds no transaction on target: the store saves on its
// own. A stored revision not lower than next's is an error wrapping
// session.ErrStaleRevision. Every database store calls it first in its
// PrepareSave.
func (t *Txn) StageSession(ctx context.Context, target string, next *session.Session, data []byte) (Prepared, error) {
	if t == nil || target == "" || t.Participant(target) == nil {
		return nil, nil
	}
	err := t.Put(ctx, target, Sessions, next.SessionID, next.Revision, data)
	if errors.Is(err, ErrStale) {
		return nil, fmt.Errorf("%w: %w", session.ErrStaleRevision, err)
	}
	if err != nil {
		return nil, err
	}
	return &Staged{Into: target}, nil
}

// Step names a point of CommitSession, where tests inject faults.
type Step string

// The steps of CommitSession, in order.
const (
	StepBeforeSessionSave Step = "before-session-save" // the plugins stored; nothing staged
	StepAfterSessionSave  Step = "after-session-save"  // the session row or file is staged
	StepBeforeSQLCommit   Step = "before-sql-commit"   // before a database's COMMIT
	StepAfterSQLCommit    Step = "after-sql-commit"    // after it
	StepBeforeSessionDone Step = "before-session-done" // the databases committed; the session store not yet
	StepAfterSessionDone  Step = "after-session-done"  // everything committed
)

// Store is where CommitSession saves the session.
type Store struct {
	// Saver receives the session; nil keeps it only in the databases'
	// journal.
	Saver Saver
	// Load reads the saver's copy of a session, or returns an error
	// wrapping session.ErrNotFound; nil when the saver cannot read.
	Load func(ctx context.Context, id string) (*session.Session, error)
	// Log receives the warnings of a commit that completed in its
	// databases but not in its store.
	Log *slog.Logger
	// Fault, when set (by tests, through the agent's export_test.go), is
	// called at each Step; an error stops the commit there, as a crash at
	// that point would, except that the process lives on to report.
	Fault func(Step) error
}

func (st *Store) step(s Step) error {
	if st.Fault == nil {
		return nil
	}
	if err := st.Fault(s); err != nil {
		return fmt.Errorf("txn: commit: injected fault at %s: %w", s, err)
	}
	return nil
}

// CommitSession commits next with the open transactions of t: the
// databases the run's plugins wrote and the session in st, as one commit
// (see the package documentation for the steps and what each failure
// leaves). It empties t.
func (t *Txn) CommitSession(ctx context.Context, next *session.Session, st Store) error {
	targets := t.Targets()
	if err := st.step(StepBeforeSessionSave); err != nil {
		return err
	}
	if len(targets) == 0 {
		if st.Saver == nil {
			return st.step(StepAfterSessionDone)
		}
		if err := st.Saver.Save(ctx, next); err != nil {
			return err
		}
		if err := st.step(StepAfterSessionSave); err != nil {
			return err
		}
		return st.step(StepAfterSessionDone)
	}
	data, err := session.Encode(next)
	if err != nil {
		return err
	}
	var prep Prepared
	switch s := st.Saver.(type) {
	case nil:
	case Stager:
		if prep, err = s.PrepareSave(ctx, t, next); err != nil {
			return err
		}
	default:
		// A saver that cannot stage: save first, so a refused save
		// leaves the databases untouched.
		if err := s.Save(ctx, next); err != nil {
			return err
		}
	}
	abort := func() {
		if prep != nil {
			prep.Abort()
		}
	}
	if err := st.step(StepAfterSessionSave); err != nil {
		abort()
		return err
	}
	if err := t.journal(ctx, st, targets, prep, next, data, abort); err != nil {
		abort()
		return err
	}
	t.mu.Lock()
	t.fault = st.step
	t.mu.Unlock()
	if err := t.Commit(ctx); err != nil {
		abort()
		var ce *CommitError
		if errors.As(err, &ce) && len(ce.Committed) > 0 {
			return fmt.Errorf("%w (the databases %v committed; their journal brings the session store up to date on the next run)", err, ce.Committed)
		}
		return err
	}
	if err := st.step(StepBeforeSessionDone); err != nil {
		abort()
		return nil // committed with the databases; see the package doc
	}
	if prep != nil {
		if err := prep.Commit(ctx); err != nil {
			// The run is committed: its databases hold it, journal
			// included. Failing it now would make the caller repeat a
			// turn that is stored.
			if st.Log != nil {
				st.Log.Warn("txn: the run committed in its databases but the session store was not updated; the next run brings it up to date from their journal",
					"session", next.SessionID, "revision", next.Revision, "error", err)
			}
			return nil
		}
	}
	return st.step(StepAfterSessionDone)
}

// journal writes next's journal row into every target but the one the
// session row went into (prep's), refused where the journal holds a
// revision not lower: then repair decides whether the store is behind.
func (t *Txn) journal(ctx context.Context, st Store, targets []string, prep Prepared, next *session.Session, data []byte, abort func()) error {
	for _, target := range targets {
		if prep != nil && prep.Target() == target {
			continue
		}
		if err := t.Put(ctx, target, Journal, next.SessionID, next.Revision, data); err != nil {
			if errors.Is(err, ErrStale) && st.Saver != nil {
				err = t.repair(ctx, st, target, next, err, abort)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
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
func (t *Txn) repair(ctx context.Context, st Store, target string, next *session.Session, stale error, abort func()) error {
	staleErr := fmt.Errorf("%w: %w", session.ErrStaleRevision, stale)
	if st.Load == nil {
		return staleErr
	}
	var storedRev int64
	switch stored, err := st.Load(ctx, next.SessionID); {
	case errors.Is(err, session.ErrNotFound):
	case err != nil:
		return staleErr
	default:
		storedRev = stored.Revision
	}
	rev, jdata, err := t.Get(ctx, target, Journal, next.SessionID)
	if err != nil || rev <= storedRev {
		// The store is not behind the journal: a concurrent run.
		return staleErr
	}
	js, derr := session.Decode(jdata)
	if derr != nil || js.SessionID != next.SessionID || js.Revision != rev {
		return fmt.Errorf("%w; and the journal row in %s is not a valid session: %v", staleErr, target, derr)
	}
	abort()
	t.Rollback(ctx)
	switch err := st.Saver.Save(ctx, js); {
	case err == nil:
		// The caller gets the error; a log at Info, not Warn, says it
		// once for a caller that runs again without reading it.
		if st.Log != nil {
			st.Log.Info("txn: the session store was behind a database's journal and was brought up to date; the run was not committed",
				"session", next.SessionID, "database", target, "revision", rev)
		}
		return fmt.Errorf("txn: session %q: the session store was at revision %d and database %s at %d: %w, run again: %w",
			next.SessionID, storedRev, target, rev, session.ErrStoreRepaired, session.ErrStaleRevision)
	case errors.Is(err, session.ErrStaleRevision):
		return staleErr
	default:
		return fmt.Errorf("txn: session %q: the session store is behind database %s (revision %d) and could not be brought up to date: %w",
			next.SessionID, target, rev, err)
	}
}

// MarkHeld records in next, for each slot whose every storage target is in
// targets (the databases the commit of next writes into: the session row
// or a journal row goes there with it), that the storage holds next's
// revision (session.Provenance.Revision). The agent compares it with what
// a database holds before a run, so a session moved or restored together
// with its database is recognised by content.
func MarkHeld(next *session.Session, targets []string) {
	for key, p := range next.Provenance {
		fields := strings.Fields(p.Storage)
		if len(fields) == 0 || slices.ContainsFunc(fields, func(t string) bool { return !slices.Contains(targets, t) }) {
			continue
		}
		p.Revision = next.Revision
		next.SetProvenance(key, p)
	}
}
