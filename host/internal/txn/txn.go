package txn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Table names a host-owned table a Participant keeps next to the plugin's
// data. A plugin's statements can neither read nor write these tables.
type Table string

const (
	// Sessions is the session store's table: the whole session, one row
	// per session id.
	Sessions Table = "sessions"
	// Journal records, in a plugin's database, the session each committed
	// run produced, so that a session kept elsewhere (a file) that missed a
	// commit can be brought up to the database.
	Journal Table = "journal"
)

// Errors of Put and Get.
var (
	// ErrStale is Put's answer when the stored revision is not lower than
	// the one being written: someone committed meanwhile.
	ErrStale = errors.New("txn: stale revision")
	// ErrNotFound is Get's answer for a row that does not exist.
	ErrNotFound = errors.New("txn: no such row")
	// ErrNoTarget is the answer for a target with no open transaction in
	// the Txn.
	ErrNoTarget = errors.New("txn: target has no open transaction")
	// ErrBusy reports a database that another writer (another process,
	// usually) kept locked for longer than the host waits for it. Nothing
	// of the run was committed: running it again is safe, and a store
	// written by many processes at once belongs in PostgreSQL, which locks
	// rows rather than the whole file.
	ErrBusy = errors.New("txn: database busy")
)

// Participant is one database's transaction inside a Txn, provided by the
// capability that opened it.
type Participant interface {
	// Put writes a host row in the open transaction if the stored row's
	// revision is lower than rev (or there is none), and returns an error
	// wrapping ErrStale otherwise.
	Put(ctx context.Context, t Table, id string, rev int64, data []byte) error
	// Get reads a host row in the open transaction, or returns an error
	// wrapping ErrNotFound.
	Get(ctx context.Context, t Table, id string) (rev int64, data []byte, err error)
	// Delete removes a host row in the open transaction, if there is one.
	Delete(ctx context.Context, t Table, id string) error
	// Commit commits the transaction and releases its connection.
	Commit(ctx context.Context) error
	// Rollback rolls it back and releases its connection.
	Rollback(ctx context.Context) error
}

// Txn is the open database work of one unit (an agent's run up to its
// commit). It is safe for concurrent use by the calls of that unit.
type Txn struct {
	mu     sync.Mutex
	parts  map[string]Participant
	order  []string // targets in the order they joined
	failed error
	fault  func(Step) error // CommitSession's fault injector, for one Commit
}

// New returns an empty Txn.
func New() *Txn { return &Txn{parts: map[string]Participant{}} }

type ctxKey struct{}

// With returns a context whose plugin calls join t.
func With(ctx context.Context, t *Txn) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// From returns the Txn of ctx, or nil.
func From(ctx context.Context) *Txn {
	t, _ := ctx.Value(ctxKey{}).(*Txn)
	return t
}

// Participant returns the open transaction of target, or nil.
func (t *Txn) Participant(target string) Participant {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.parts[target]
}

// Join adds the open transaction of target. A capability calls it when a
// call leaves uncommitted work behind, the first time for that target.
func (t *Txn) Join(target string, p Participant) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.parts[target]; ok {
		return fmt.Errorf("txn: %s joined twice", target)
	}
	t.parts[target] = p
	t.order = append(t.order, target)
	return nil
}

// Fail marks the Txn failed: Commit will roll back and return err. A
// capability calls it when a transaction was lost under a call (an
// interrupted statement, an I/O error) although the call's own error may
// have gone unnoticed.
func (t *Txn) Fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.failed == nil {
		t.failed = err
	}
}

// Err is the error Fail recorded, or nil.
func (t *Txn) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Targets lists the targets with open transactions, in the order they
// joined.
func (t *Txn) Targets() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.order)
}

// Put writes a host row in target's open transaction; see Participant.
func (t *Txn) Put(ctx context.Context, target string, tab Table, id string, rev int64, data []byte) error {
	p, err := t.part(target)
	if err != nil {
		return err
	}
	return p.Put(ctx, tab, id, rev, data)
}

// Get reads a host row in target's open transaction; see Participant.
func (t *Txn) Get(ctx context.Context, target string, tab Table, id string) (int64, []byte, error) {
	p, err := t.part(target)
	if err != nil {
		return 0, nil, err
	}
	return p.Get(ctx, tab, id)
}

// Delete removes a host row in target's open transaction; see Participant.
func (t *Txn) Delete(ctx context.Context, target string, tab Table, id string) error {
	p, err := t.part(target)
	if err != nil {
		return err
	}
	return p.Delete(ctx, tab, id)
}

func (t *Txn) part(target string) (Participant, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.parts[target]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoTarget, target)
	}
	return p, nil
}

// held is what a Txn held when it was emptied.
type held struct {
	order  []string
	parts  map[string]Participant
	failed error
	fault  func(Step) error
}

// take empties the Txn for its next unit and returns what it held.
func (t *Txn) take() held {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := held{t.order, t.parts, t.failed, t.fault}
	t.order, t.parts, t.failed, t.fault = nil, map[string]Participant{}, nil, nil
	return h
}

// Commit commits every open transaction, in the order they joined, and
// empties the Txn, which the next unit of work (the run's next commit) can
// use. If the Txn failed or a commit fails, the transactions not
// yet committed are rolled back; those already committed stay (with
// several databases there is no atomic commit across them, see
// CommitError).
//
// A cancelled ctx does not stop Commit, but its deadline, if any, bounds
// each Participant's commit: the run's remaining time. Rollbacks ignore
// both.
func (t *Txn) Commit(ctx context.Context) error {
	cctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(cctx, dl)
		defer cancel()
	}
	ctx = context.WithoutCancel(ctx)
	h := t.take()
	order, parts, failed, fault := h.order, h.parts, h.failed, h.fault
	if fault == nil {
		fault = func(Step) error { return nil }
	}
	if failed != nil {
		return errors.Join(fmt.Errorf("txn: rolled back: %w", failed), rollbackAll(ctx, order, parts))
	}
	for i, target := range order {
		if err := fault(StepBeforeSQLCommit); err != nil {
			return &CommitError{Target: target, Committed: slices.Clone(order[:i]), Err: errors.Join(err, rollbackAll(ctx, order[i:], parts))}
		}
		if err := parts[target].Commit(cctx); err != nil {
			// A failed COMMIT ends its own transaction.
			return &CommitError{Target: target, Committed: slices.Clone(order[:i]), Err: errors.Join(err, rollbackAll(ctx, order[i+1:], parts))}
		}
		if err := fault(StepAfterSQLCommit); err != nil {
			return &CommitError{Target: target, Committed: slices.Clone(order[:i+1]), Err: errors.Join(err, rollbackAll(ctx, order[i+1:], parts))}
		}
	}
	return nil
}

func rollbackAll(ctx context.Context, order []string, parts map[string]Participant) error {
	var errs []error
	for i := len(order) - 1; i >= 0; i-- {
		if err := parts[order[i]].Rollback(ctx); err != nil {
			errs = append(errs, fmt.Errorf("roll back %s: %w", order[i], err))
		}
	}
	return errors.Join(errs...)
}

// Rollback rolls back every open transaction and empties the Txn. On an
// empty Txn it does nothing, so it can be deferred.
func (t *Txn) Rollback(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	h := t.take()
	return rollbackAll(ctx, h.order, h.parts)
}

// CommitError reports a Commit that failed at Target. The targets in
// Committed had committed before it; the others were rolled back.
type CommitError struct {
	Target    string
	Committed []string
	Err       error
}

func (e *CommitError) Error() string {
	if len(e.Committed) == 0 {
		return fmt.Sprintf("txn: commit %s: %v", e.Target, e.Err)
	}
	return fmt.Sprintf("txn: commit %s (after %v committed): %v", e.Target, e.Committed, e.Err)
}

func (e *CommitError) Unwrap() error { return e.Err }
