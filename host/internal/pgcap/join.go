package pgcap

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

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

// Target implements capability.Joiner: one target per named database, so
// that the session store on that database (host/store/pgstore with the
// same Name) finds the run's transaction.
func (g *grant) Target(ctx context.Context) (string, error) {
	if err := g.cfg.Check(); err != nil {
		return "", err
	}
	return txn.PostgresTarget(g.cfg.Name), nil
}

// Accept implements capability.Acceptor: one transaction runs as one role,
// so a Txn serves one schema of each named database.
func (s *session) Accept(ctx context.Context, g capability.Grant) error {
	pg, ok := g.(*grant)
	if !ok {
		return fmt.Errorf("pgcap: %s is held by a PostgreSQL transaction; a grant of type %T cannot join it", txn.PostgresTarget(s.db.name), g)
	}
	if pg.cfg.AdminDSN != s.db.dsn {
		return fmt.Errorf("pgcap: %s: this run's transaction is another database's: give the grants on different databases different names", txn.PostgresTarget(s.db.name))
	}
	schema, _, err := pg.cfg.schema(ctx, s.db.key)
	if err != nil {
		return err
	}
	if schema != s.role.schema {
		return fmt.Errorf("pgcap: %s: this run's transaction is schema %q's; schema %q cannot join it: give the grants on different schemas different names",
			txn.PostgresTarget(s.db.name), s.role.schema, schema)
	}
	return nil
}

// StartCall implements capability.Joinable.
func (s *session) StartCall(ctx context.Context) error { return s.calls.Start(ctx, s) }

// EndCall implements capability.Joinable.
func (s *session) EndCall(ctx context.Context, ok bool) (pending bool, err error) {
	return s.calls.End(ctx, s, ok)
}

// The session is the txn.Conn of its Calls.
var _ txn.Conn = (*session)(nil)

// Where implements txn.Conn.
func (s *session) Where() string { return "pgcap: " + s.db.name }

// Began implements txn.Conn.
func (s *session) Began() bool { return s.began }

// Failed implements txn.Conn.
func (s *session) Failed() error { return s.failed }

// Fail implements txn.Conn.
func (s *session) Fail(err error) {
	if s.failed == nil {
		s.failed = err
	}
}

// HostExec implements txn.Conn.
func (s *session) HostExec(ctx context.Context, q string) error { return s.host(ctx, q) }

// CallStarts implements txn.Conn: the host's statements of the call end by
// the call's deadline.
func (s *session) CallStarts(ctx context.Context) {
	s.deadline, _ = ctx.Deadline()
	s.waited = 0 // each call may wait LockWait for others' locks
}

// CallKept implements txn.Conn: from here the Txn commits the call's work,
// within the run's remaining time rather than the call's.
func (s *session) CallKept() { s.deadline = time.Time{} }

// Pending implements txn.Conn: a read-only transaction ends at once, so
// that no snapshot or lock is held across the model call that follows.
func (s *session) Pending(context.Context) bool { return s.wrote }

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
	var stored []byte
	put := &step{
		sql:    s.db.sql.put,
		values: [][]byte{s.db.keyBytes, []byte(tab), []byte(id), strconv.AppendInt(nil, rev, 10), data},
		oids:   []uint32{oidText, oidText, oidText, oidInt8, oidText},
		read: func(rr *pgconn.ResultReader) {
			for rr.NextRow() {
				if v := rr.Values()[0]; v != nil {
					stored = append([]byte(nil), v...)
				}
			}
		},
	}
	// The plugin's part ends before the host's rows are written: its
	// deferred triggers do not run while the transaction holds them.
	perr, err := s.settle(ctx, put)
	if err != nil {
		return fmt.Errorf("pgcap: %s: write %s row %q: %w", s.db.name, tab, id, err)
	}
	if perr != nil {
		// The transaction is aborted: nothing of the run can commit.
		s.failed = perr
		return fmt.Errorf("pgcap: %s: write %s row %q at revision %d: %w", s.db.name, tab, id, rev, perr)
	}
	s.hostWrote = true
	if stored != nil {
		return fmt.Errorf("pgcap: %s: write %s row %q at revision %d: stored revision is %s: %w", s.db.name, tab, id, rev, stored, txn.ErrStale)
	}
	return nil
}

// rows reads the host rows of tabs for id in one statement (get_rows),
// in the session's transaction if it has begun, else in one of its own:
// a row for each of tabs, nil where there is none.
func (s *session) rows(ctx context.Context, id string, tabs ...txn.Table) ([]*capability.Row, error) {
	names := make([]string, len(tabs))
	for i, t := range tabs {
		var err error
		if names[i], err = tableName(t); err != nil {
			return nil, err
		}
	}
	rows := make([]*capability.Row, len(tabs))
	var bad error
	_, err := s.roundTrip(ctx, []*step{{
		sql:    s.db.sql.getRows,
		values: [][]byte{s.db.keyBytes, []byte("{" + strings.Join(names, ",") + "}"), []byte(id)},
		oids:   []uint32{oidText, oidTextArray, oidText},
		read: func(rr *pgconn.ResultReader) {
			for rr.NextRow() {
				v := rr.Values()
				i := slices.Index(names, string(v[0]))
				rev, err := strconv.ParseInt(string(v[1]), 10, 64)
				switch {
				case i < 0:
					bad = fmt.Errorf("a row of table %q, not asked for", v[0])
				case err != nil:
					bad = fmt.Errorf("%s row %q: revision %q: %w", names[i], id, v[1], err)
				default:
					rows[i] = &capability.Row{Revision: rev, Data: append([]byte(nil), v[2]...)}
				}
			}
		},
	}})
	if err != nil {
		if !s.began && !s.pc.IsClosed() && s.pc.TxStatus() != 'I' {
			s.began = true // for End to roll back
		}
		s.failed = err
		return nil, fmt.Errorf("pgcap: %s: read the host rows of %q: %w", s.db.name, id, err)
	}
	if bad != nil {
		return nil, fmt.Errorf("pgcap: %s: read the host rows of %q: %w", s.db.name, id, bad)
	}
	return rows, nil
}

// Get implements txn.Participant.
func (s *session) Get(ctx context.Context, t txn.Table, id string) (int64, []byte, error) {
	if err := s.usable(); err != nil {
		return 0, nil, err
	}
	rows, err := s.rows(ctx, id, t)
	switch {
	case err != nil:
		return 0, nil, err
	case rows[0] == nil:
		return 0, nil, fmt.Errorf("pgcap: %s: %s row %q: %w", s.db.name, t, id, txn.ErrNotFound)
	}
	return rows[0].Revision, rows[0].Data, nil
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
	del := &step{
		sql:    s.db.sql.del,
		values: [][]byte{s.db.keyBytes, []byte(tab), []byte(id)},
		oids:   []uint32{oidText, oidText, oidText},
	}
	derr, err := s.settle(ctx, del)
	if err != nil {
		return fmt.Errorf("pgcap: %s: delete %s row %q: %w", s.db.name, tab, id, err)
	}
	if derr != nil {
		s.failed = derr
		return fmt.Errorf("pgcap: %s: delete %s row %q: %w", s.db.name, tab, id, derr)
	}
	s.hostWrote = true
	return nil
}

// usable refuses host rows on a session without an open, intact
// transaction.
func (s *session) usable() error {
	if s.failed != nil {
		return fmt.Errorf("pgcap: %s: the transaction was lost: %w", s.db.name, hostCause(s.failed))
	}
	if !s.began || s.ended {
		return fmt.Errorf("pgcap: %s: %w", s.db.name, txn.ErrNoTarget)
	}
	return nil
}

// ReadRows implements capability.RowReader: outside the call's
// transaction, one statement, which is a transaction of its own (get_rows
// reads every row in one query, so in one snapshot); inside it, the same
// statement in it. No code of the plugin's runs in it, so begin's checks
// have nothing to guard.
func (s *session) ReadRows(ctx context.Context, id string, tables ...txn.Table) ([]capability.Row, error) {
	if s.failed != nil || s.ended {
		return nil, s.usable()
	}
	found, err := s.rows(ctx, id, tables...)
	if err != nil {
		return nil, err
	}
	rows := make([]capability.Row, len(tables))
	for i, r := range found {
		if r != nil {
			rows[i] = *r
		}
	}
	return rows, nil
}
