package pgcap

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// A session joins a txn.Txn as its grant's Joinable, as on SQLite: its
// transaction stays open across the calls of the Txn while it holds
// writes, each later call inside a savepoint, and the host's session and
// journal rows are written into the same transaction through the host
// schema's functions.
var (
	_ capability.Joiner   = (*grant)(nil)
	_ capability.Joinable = (*session)(nil)
	_ capability.Acceptor = (*session)(nil)
)

// Target is the txn target of the PostgreSQL database named name.
func Target(name string) string { return txn.PostgresTarget(name) }

// Target implements capability.Joiner: one target per named database, so
// that the session store on that database (host/agent/pgstore with the
// same Name) finds the run's transaction.
func (g *grant) Target(ctx context.Context) (string, error) {
	if err := g.cfg.Check(); err != nil {
		return "", err
	}
	return Target(g.cfg.Name), nil
}

// Accept implements capability.Acceptor: one transaction runs as one role,
// so a Txn serves one schema of each named database.
func (s *session) Accept(ctx context.Context, g capability.Grant) error {
	pg, ok := g.(*grant)
	if !ok {
		return fmt.Errorf("pgcap: %s is held by a PostgreSQL transaction; a grant of type %T cannot join it", Target(s.db.name), g)
	}
	schema, err := pg.cfg.schema(ctx)
	if err != nil {
		return err
	}
	if schema != s.role.schema || pg.cfg.AdminDSN != s.db.dsn {
		return fmt.Errorf("pgcap: %s: this run's transaction is schema %q's; schema %q cannot join it: give the grants on different schemas different names",
			Target(s.db.name), s.role.schema, schema)
	}
	return nil
}

// StartCall implements capability.Joinable.
func (s *session) StartCall(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("pgcap: %s: waiting for another call's use: %w", s.db.name, ctx.Err())
	}
	s.joined = true
	s.deadline, _ = ctx.Deadline()
	s.laterCall = s.began
	if s.began && s.failed == nil {
		if err := s.host(ctx, "SAVEPOINT "+callSavepoint); err != nil {
			<-s.turn
			return fmt.Errorf("pgcap: %s: savepoint: %w", s.db.name, err)
		}
		s.savepoint = true
	}
	return nil
}

// EndCall implements capability.Joinable.
func (s *session) EndCall(ctx context.Context, ok bool) (pending bool, err error) {
	ctx = context.WithoutCancel(ctx)
	defer func() { <-s.turn }()
	if !s.began {
		return false, s.End(ctx, ok)
	}
	if s.laterCall {
		s.laterCall, s.savepoint = false, false
		switch {
		case s.failed != nil:
			return true, s.failed
		case ok:
			s.deadline = time.Time{}
			if err := s.host(ctx, "RELEASE SAVEPOINT "+callSavepoint); err != nil {
				s.failed = err
				return true, fmt.Errorf("pgcap: %s: release savepoint: %w", s.db.name, err)
			}
		default:
			if err := s.host(ctx, "ROLLBACK TO SAVEPOINT "+callSavepoint+"; RELEASE SAVEPOINT "+callSavepoint); err != nil {
				s.failed = err
				return true, fmt.Errorf("pgcap: %s: roll back a failed call: %w", s.db.name, err)
			}
		}
		return true, nil
	}
	if !ok || s.failed != nil {
		return false, s.End(ctx, ok)
	}
	if s.wrote {
		// The Txn commits it, within the run's remaining time.
		s.deadline = time.Time{}
		return true, nil
	}
	// Read only: end it now, so that no snapshot or lock is held across
	// the model call that follows.
	return false, s.End(ctx, true)
}

// Commit implements txn.Participant.
func (s *session) Commit(ctx context.Context) error { return s.End(ctx, true) }

// Rollback implements txn.Participant.
func (s *session) Rollback(ctx context.Context) error { return s.End(ctx, false) }

func tableName(t txn.Table) (string, error) {
	switch t {
	case txn.Sessions, txn.Journal:
		return string(t), nil
	}
	return "", fmt.Errorf("pgcap: unknown table %q", t)
}

// Put implements txn.Participant: the row goes through the host schema's
// put_row, which checks the revision in the statement that writes.
func (s *session) Put(ctx context.Context, t txn.Table, id string, rev int64, data []byte) error {
	tab, err := tableName(t)
	if err != nil {
		return err
	}
	if err := s.usable(); err != nil {
		return err
	}
	// The plugin's part ends before the host's rows are written: its
	// deferred triggers do not run while the transaction holds them.
	if err := s.settle(ctx); err != nil {
		return fmt.Errorf("pgcap: %s: write %s row %q: %w", s.db.name, tab, id, err)
	}
	rr := s.pc.ExecParams(ctx, `SELECT `+s.db.qhost()+`.put_row($1, $2, $3, $4, $5)`,
		[][]byte{[]byte(s.db.key), []byte(tab), []byte(id), strconv.AppendInt(nil, rev, 10), data},
		[]uint32{oidText, oidText, oidText, oidInt8, oidText}, nil, nil)
	var stored []byte
	for rr.NextRow() {
		stored = append([]byte(nil), rr.Values()[0]...)
	}
	if _, err := rr.Close(); err != nil {
		// The transaction is aborted: nothing of the run can commit.
		s.failed = err
		return fmt.Errorf("pgcap: %s: write %s row %q at revision %d: %w", s.db.name, tab, id, rev, err)
	}
	if stored != nil {
		return fmt.Errorf("pgcap: %s: write %s row %q at revision %d: stored revision is %s: %w", s.db.name, tab, id, rev, stored, txn.ErrStale)
	}
	return nil
}

// Get implements txn.Participant.
func (s *session) Get(ctx context.Context, t txn.Table, id string) (int64, []byte, error) {
	tab, err := tableName(t)
	if err != nil {
		return 0, nil, err
	}
	if err := s.usable(); err != nil {
		return 0, nil, err
	}
	rr := s.pc.ExecParams(ctx, `SELECT revision, body FROM `+s.db.qhost()+`.get_row($1, $2, $3)`,
		[][]byte{[]byte(s.db.key), []byte(tab), []byte(id)}, []uint32{oidText, oidText, oidText}, nil, nil)
	var (
		rev   []byte
		data  []byte
		found bool
	)
	for rr.NextRow() {
		v := rr.Values()
		rev, data, found = append([]byte(nil), v[0]...), append([]byte(nil), v[1]...), true
	}
	if _, err := rr.Close(); err != nil {
		s.failed = err
		return 0, nil, fmt.Errorf("pgcap: %s: read %s row %q: %w", s.db.name, tab, id, err)
	}
	if !found {
		return 0, nil, fmt.Errorf("pgcap: %s: %s row %q: %w", s.db.name, tab, id, txn.ErrNotFound)
	}
	r, err := strconv.ParseInt(string(rev), 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("pgcap: %s: %s row %q: revision %q: %w", s.db.name, tab, id, rev, err)
	}
	return r, data, nil
}

// Delete implements txn.Participant.
func (s *session) Delete(ctx context.Context, t txn.Table, id string) error {
	tab, err := tableName(t)
	if err != nil {
		return err
	}
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.settle(ctx); err != nil {
		return fmt.Errorf("pgcap: %s: delete %s row %q: %w", s.db.name, tab, id, err)
	}
	rr := s.pc.ExecParams(ctx, `SELECT `+s.db.qhost()+`.delete_row($1, $2, $3)`,
		[][]byte{[]byte(s.db.key), []byte(tab), []byte(id)}, []uint32{oidText, oidText, oidText}, nil, nil)
	if _, err := rr.Close(); err != nil {
		s.failed = err
		return fmt.Errorf("pgcap: %s: delete %s row %q: %w", s.db.name, tab, id, err)
	}
	return nil
}

// usable refuses host rows on a session without an open, intact
// transaction.
func (s *session) usable() error {
	if s.failed != nil {
		return fmt.Errorf("pgcap: %s: the transaction was lost: %w", s.db.name, s.failed)
	}
	if !s.began || s.ended {
		return fmt.Errorf("pgcap: %s: %w", s.db.name, txn.ErrNoTarget)
	}
	return nil
}
