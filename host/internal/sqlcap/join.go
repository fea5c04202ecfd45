package sqlcap

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// A session joins a txn.Txn as the grant's Joinable: its transaction stays
// open across the calls of the Txn while it holds writes, each call inside a
// savepoint so that a failed call undoes only its own part, and the host's
// session and journal rows are written into the same transaction.
var (
	_ capability.Joiner   = (*grant)(nil)
	_ capability.Joinable = (*session)(nil)
)

// Target implements capability.Joiner.
func (g *grant) Target(ctx context.Context) (string, error) {
	path, err := g.path(ctx)
	if err != nil {
		return "", fmt.Errorf("sqlcap: choose database: %w", err)
	}
	if path == "" {
		return "", errors.New("sqlcap: the grant names no database file")
	}
	t, err := txn.SQLiteTarget(path)
	if err != nil {
		return "", fmt.Errorf("sqlcap: %w", err)
	}
	return t, nil
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
func (s *session) Where() string { return "sqlcap: " + s.db.path }

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
func (s *session) HostExec(ctx context.Context, q string) error { return s.hostExec(ctx, q) }

// CallStarts implements txn.Conn: the call that will begin the transaction
// marks what the connection had changed.
func (s *session) CallStarts(ctx context.Context) {
	if !s.began {
		s.mark = s.changes(ctx)
	}
}

// CallKept implements txn.Conn.
func (s *session) CallKept() {}

// Pending implements txn.Conn: the transaction holds writes, or took the
// write lock and changed something. A call that took the lock and wrote
// nothing (a plugin's write batch that only checked a schema version) ends
// like a read, so that no lock is held across the model call that follows
// and a later write starts from the newest data.
func (s *session) Pending(ctx context.Context) bool { return s.wrote() && !s.unchanged(ctx) }

// changeMark is what a connection has changed: rows (total_changes64,
// counted over the connection's life), and the schema, user and
// application versions of its database.
type changeMark struct{ rows, schema, user, app int64 }

// changes reads the connection's mark, or nil if it cannot.
func (s *session) changes(ctx context.Context) *changeMark {
	// Reading the header takes no lock a writer holds (the file is in
	// WAL mode), so it cannot wait: a context that never ends spares the
	// driver a watcher goroutine for each statement, three or six a turn.
	ctx = context.WithoutCancel(ctx)
	var m changeMark
	err := s.conn.Raw(func(dc any) error {
		c := dc.(*conn)
		m.rows = sqlite3.Xsqlite3_total_changes64(c.callTLS(), c.handle)
		for i, dst := range []*int64{&m.schema, &m.user, &m.app} {
			v, err := c.pragmaInt(ctx, headerPragmas[i])
			if err != nil {
				return err
			}
			*dst = v
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return &m
}

// headerPragmas read the versions a changeMark records. Each is a
// statement of its own, prepared once per connection: a PRAGMA statement
// reads its value straight from the database header, where the
// table-valued pragma_schema_version and its kind, selected together,
// prepare a statement of their own inside each call, which was 8% of a
// turn through the sqlite plugin.
var headerPragmas = [3]string{`PRAGMA schema_version`, `PRAGMA user_version`, `PRAGMA application_id`}

// pragmaInt runs a host PRAGMA statement that answers one integer.
func (c *conn) pragmaInt(ctx context.Context, q string) (int64, error) {
	rows, err := c.query(ctx, q, nil, false)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	vals := make([]driver.Value, 1)
	if err := rows.Next(vals); err != nil {
		return 0, err
	}
	v, ok := vals[0].(int64)
	if !ok {
		return 0, fmt.Errorf("pragma value of type %T", vals[0])
	}
	return v, nil
}

// unchanged reports whether the transaction changed nothing since the
// call began it: no row written and no schema or header version moved.
// Unsure (no mark) counts as changed.
func (s *session) unchanged(ctx context.Context) bool {
	if s.mark == nil {
		return false
	}
	now := s.changes(ctx)
	return now != nil && *now == *s.mark
}

// wrote reports whether the open transaction holds writes (or the write
// lock, after BEGIN IMMEDIATE).
func (s *session) wrote() bool {
	state := int32(sqlite3.SQLITE_TXN_WRITE)
	s.conn.Raw(func(dc any) error {
		c := dc.(*conn)
		state = sqlite3.Xsqlite3_txn_state(c.callTLS(), c.handle, 0)
		return nil
	})
	return state == sqlite3.SQLITE_TXN_WRITE
}

// Commit implements txn.Participant.
func (s *session) Commit(ctx context.Context) error { return s.End(ctx, true) }

// Rollback implements txn.Participant.
func (s *session) Rollback(ctx context.Context) error { return s.End(ctx, false) }

// Put implements txn.Participant.
func (s *session) Put(ctx context.Context, t txn.Table, id string, rev int64, data []byte) error {
	table, err := txn.SQLiteTable(t)
	if err != nil {
		return err
	}
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.hostExec(ctx, txn.SQLiteCreate(table)); err != nil {
		return fmt.Errorf("sqlcap: %s: create %s: %w", s.db.path, table, err)
	}
	var n int64
	err = s.conn.Raw(func(dc any) error {
		res, err := dc.(*conn).exec(ctx, txn.SQLiteUpsert(table), []driver.NamedValue{
			{Ordinal: 1, Value: id}, {Ordinal: 2, Value: rev}, {Ordinal: 3, Value: time.Now().UnixMicro()}, {Ordinal: 4, Value: string(data)},
		})
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlcap: %s: write %s row %q at revision %d: %w", s.db.path, table, id, rev, err)
	}
	if n == 0 {
		stored, _, _ := s.Get(ctx, t, id)
		return fmt.Errorf("sqlcap: %s: write %s row %q at revision %d: stored revision is %d: %w", s.db.path, table, id, rev, stored, txn.ErrStale)
	}
	return nil
}

// Get implements txn.Participant.
func (s *session) Get(ctx context.Context, t txn.Table, id string) (int64, []byte, error) {
	table, err := txn.SQLiteTable(t)
	if err != nil {
		return 0, nil, err
	}
	if err := s.usable(); err != nil {
		return 0, nil, err
	}
	var (
		rev   int64
		data  []byte
		found bool
	)
	err = s.conn.Raw(func(dc any) error {
		rows, err := dc.(*conn).query(ctx, txn.SQLiteSelect(table), []driver.NamedValue{{Ordinal: 1, Value: id}}, false)
		if err != nil {
			return err
		}
		defer rows.Close()
		vals := make([]driver.Value, 2)
		switch err := rows.Next(vals); {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
		found = true
		r, ok1 := vals[0].(int64)
		d, ok2 := vals[1].(string)
		if !ok1 || !ok2 {
			return fmt.Errorf("row of types %T, %T", vals[0], vals[1])
		}
		rev, data = r, []byte(d)
		return nil
	})
	if err != nil && strings.Contains(err.Error(), "no such table") {
		err, found = nil, false
	}
	if err != nil {
		return 0, nil, fmt.Errorf("sqlcap: %s: read %s row %q: %w", s.db.path, table, id, err)
	}
	if !found {
		return 0, nil, fmt.Errorf("sqlcap: %s: %s row %q: %w", s.db.path, table, id, txn.ErrNotFound)
	}
	return rev, data, nil
}

// Delete implements txn.Participant.
func (s *session) Delete(ctx context.Context, t txn.Table, id string) error {
	table, err := txn.SQLiteTable(t)
	if err != nil {
		return err
	}
	if err := s.usable(); err != nil {
		return err
	}
	err = s.conn.Raw(func(dc any) error {
		_, err := dc.(*conn).exec(ctx, txn.SQLiteDelete(table), []driver.NamedValue{{Ordinal: 1, Value: id}})
		return err
	})
	if err != nil && !strings.Contains(err.Error(), "no such table") {
		return fmt.Errorf("sqlcap: %s: delete %s row %q: %w", s.db.path, table, id, err)
	}
	return nil
}

// usable refuses host rows on a session without an open, intact
// transaction.
func (s *session) usable() error {
	if s.failed != nil {
		return fmt.Errorf("sqlcap: %s: the transaction was lost: %w", s.db.path, s.failed)
	}
	if !s.began {
		return fmt.Errorf("sqlcap: %s: %w", s.db.path, txn.ErrNoTarget)
	}
	return nil
}

// ReadRows implements capability.RowReader: a read transaction of its
// own, which the caller ends.
func (s *session) ReadRows(ctx context.Context, id string, tables ...txn.Table) ([]capability.Row, error) {
	if !s.began {
		if err := s.begin(ctx, false); err != nil {
			return nil, fmt.Errorf("sqlcap: %s: read the host rows of %q: %w", s.db.path, id, err)
		}
	}
	rows := make([]capability.Row, len(tables))
	for i, t := range tables {
		rev, data, err := s.Get(ctx, t, id)
		switch {
		case errors.Is(err, txn.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			rows[i] = capability.Row{Revision: rev, Data: data}
		}
	}
	return rows, nil
}
