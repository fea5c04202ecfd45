// Package sqlitestore keeps agent sessions in a SQLite database, one row a
// session: an store.Store and store.Manager that several
// processes on one machine may share through one database file.
//
// The row holds the session's JSON exactly as session.Encode wrote it (so
// each state slot's bytes come back as they were stored) and its revision
// in a column of its own, which Save checks in the same statement that
// writes: of two writers that loaded one revision, the second is refused
// with session.ErrStaleRevision, in one process or in several.
//
// It is a package of its own so that a program that imports only
// host/agent links no SQLite.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/wasmhist/wasmhist/host/store"

	sqlite "modernc.org/sqlite" // the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
)

// Table names are prefixed: the file may hold other tables (a provider's,
// say), and the sql capability keeps plugins away from the prefix.
const (
	sessionsTable = txn.SessionsTable
	versionTable  = txn.VersionTable
)

// schemaVersion is the layout of the tables this version writes. Open
// records it in versionTable so that a later version knows what to
// migrate, and refuses a database a later version has migrated.
const schemaVersion = 1

// busyTimeout is how long a statement waits for another connection's
// write to finish. Saves are single short statements, so waiting is
// cheap; failing with SQLITE_BUSY would turn contention into errors that
// are neither stale revisions nor real failures.
const busyTimeout = 30 * time.Second

// Store is a session store in one SQLite database. It is safe for
// concurrent use; Close releases its connections.
type Store struct {
	db     *sql.DB
	path   string
	target string
}

var (
	_ store.Manager = (*Store)(nil)
	_ txn.Stager    = (*Store)(nil)
)

// Open opens (creating if needed) the database at path and the store's
// tables in it.
func Open(path string) (*Store, error) {
	// WAL lets loads run while a save writes; synchronous=FULL makes a
	// save that returned nil survive a power cut, as a SessionFile's
	// fsyncs do. The busy timeout goes first: the other pragmas may wait
	// for a lock themselves.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()),
			"journal_mode(WAL)",
			"synchronous(FULL)",
		},
		// Open's transaction writes: taking the write lock at BEGIN makes
		// concurrent Opens wait instead of failing on a lock upgrade.
		"_txlock": {"immediate"},
	}.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	target, err := txn.SQLiteTarget(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitestore: open: %w", err)
	}
	s := &Store{db: db, path: path, target: target}
	// Switching a new file to WAL needs an exclusive lock, which SQLite
	// refuses at once (SQLITE_BUSY, without waiting) while another process
	// converts the same file: opening again shortly after succeeds.
	deadline := time.Now().Add(busyTimeout)
	for attempt := 1; ; attempt++ {
		err := s.migrate(context.Background())
		if err == nil {
			return s, nil
		}
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			db.Close()
			return nil, err
		}
		time.Sleep(time.Duration(min(attempt, 20)) * 5 * time.Millisecond)
	}
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w", s.path, err)
	}
	defer tx.Rollback()
	stmts := []string{
		`CREATE TABLE IF NOT EXISTS ` + versionTable + ` (version INTEGER NOT NULL) STRICT`,
		txn.SQLiteCreate(sessionsTable),
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqlitestore: open %s: %w", s.path, err)
		}
	}
	var nv sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT max(version) FROM `+versionTable).Scan(&nv); err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w", s.path, err)
	}
	switch v := nv.Int64; {
	case !nv.Valid:
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+versionTable+` (version) VALUES (?)`, schemaVersion); err != nil {
			return fmt.Errorf("sqlitestore: open %s: %w", s.path, err)
		}
	case v > schemaVersion:
		return fmt.Errorf("sqlitestore: open %s: the sessions tables are at version %d, newer than this program's %d: upgrade the program", s.path, v, schemaVersion)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: open %s: %w", s.path, err)
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Load implements store.Store. A row that is not a valid session
// is an error wrapping session.ErrInvalid that names the row and says
// where in its JSON the problem is.
func (s *Store) Load(ctx context.Context, id string) (*session.Session, error) {
	var (
		rev  int64
		data string
	)
	err := s.db.QueryRowContext(ctx, `SELECT revision, data FROM `+sessionsTable+` WHERE id = ?`, id).Scan(&rev, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: load %q: %w", id, session.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: load %q: %w", id, err)
	}
	return decode(s.path, id, rev, []byte(data))
}

func decode(where, id string, rev int64, data []byte) (*session.Session, error) {
	sess, err := session.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: load %q: %s table %s row %q: %w", id, where, sessionsTable, id, err)
	}
	if sess.SessionID != id || sess.Revision != rev {
		return nil, fmt.Errorf("sqlitestore: load %q: %s table %s row %q: %w: the row is session %q at revision %d, but its JSON says session %q at revision %d",
			id, where, sessionsTable, id, session.ErrInvalid, id, rev, sess.SessionID, sess.Revision)
	}
	return sess, nil
}

// Target is the txn target of the store's database: the sql capability's
// grant on the same file has the same one, and a run whose plugin wrote to
// it commits the session row in the plugin's transaction.
func (s *Store) Target() string { return s.target }

// Save implements store.Saver. The revision check is the upsert's
// WHERE clause: SQLite runs the statement under the database's write lock,
// so no other write can land between the check and the write.
func (s *Store) Save(ctx context.Context, sess *session.Session) error {
	p, err := s.PrepareSave(ctx, nil, sess)
	if err != nil {
		return err
	}
	return p.Commit(ctx)
}

// PrepareSave implements txn.Stager. When tx holds a transaction on
// the store's own database (a plugin granted this file wrote during the
// run), the row is written into it and commits with the plugin's writes.
// Otherwise the row is written in a transaction of the store's own that
// holds SQLite's write lock until Commit.
func (s *Store) PrepareSave(ctx context.Context, tx *txn.Txn, sess *session.Session) (txn.Prepared, error) {
	data, err := session.Encode(sess)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: save: %w", err)
	}
	if sess.SessionID == "" {
		return nil, fmt.Errorf("sqlitestore: save: %w: empty session id", session.ErrInvalid)
	}
	if prep, err := tx.StageSession(ctx, s.target, sess, data); prep != nil || err != nil {
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: save %q at revision %d: %w", sess.SessionID, sess.Revision, err)
		}
		return prep, nil
	}
	own, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: save %q at revision %d: %w", sess.SessionID, sess.Revision, s.busy(err))
	}
	res, err := own.ExecContext(ctx, txn.SQLiteUpsert(sessionsTable),
		sess.SessionID, sess.Revision, time.Now().UnixMicro(), string(data))
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		own.Rollback()
		return nil, fmt.Errorf("sqlitestore: save %q at revision %d: %w", sess.SessionID, sess.Revision, s.busy(err))
	}
	if n == 0 {
		// Nothing was written, so the row exists and its revision is
		// not lower.
		var stored int64
		own.QueryRowContext(ctx, `SELECT revision FROM `+sessionsTable+` WHERE id = ?`, sess.SessionID).Scan(&stored)
		own.Rollback()
		return nil, fmt.Errorf("sqlitestore: save %q at revision %d: stored revision is %d: %w",
			sess.SessionID, sess.Revision, stored, session.ErrStaleRevision)
	}
	return &txn.Staged{
		OnCommit: func(context.Context) error {
			if err := own.Commit(); err != nil {
				return fmt.Errorf("sqlitestore: save %q at revision %d: %w", sess.SessionID, sess.Revision, err)
			}
			return nil
		},
		OnAbort: func() { own.Rollback() },
	}, nil
}

// busy marks SQLite's answer after busyTimeout of waiting for another
// writer as txn.ErrBusy, the same error a plugin's database gives.
func (s *Store) busy(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY {
		return fmt.Errorf("%s: %w: another writer held its write lock for over %s (%w): run again, or keep sessions many processes write at once in PostgreSQL", s.path, txn.ErrBusy, busyTimeout, err)
	}
	return err
}

// List implements store.Manager.
func (s *Store) List(ctx context.Context) ([]store.Info, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, revision, updated_us FROM `+sessionsTable+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list: %w", err)
	}
	defer rows.Close()
	var infos []store.Info
	for rows.Next() {
		var (
			in store.Info
			us int64
		)
		if err := rows.Scan(&in.SessionID, &in.Revision, &us); err != nil {
			return nil, fmt.Errorf("sqlitestore: list: %w", err)
		}
		in.Updated = time.UnixMicro(us)
		infos = append(infos, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list: %w", err)
	}
	return infos, nil
}

// Delete implements store.Manager. Like Save, it checks the
// revision in the statement that deletes.
func (s *Store) Delete(ctx context.Context, id string, revision int64) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM `+sessionsTable+` WHERE id = ? AND revision = ?`, id, revision)
	if err != nil {
		return fmt.Errorf("sqlitestore: delete %q at revision %d: %w", id, revision, s.busy(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlitestore: delete %q at revision %d: %w", id, revision, err)
	}
	if n > 0 {
		return nil
	}
	var stored int64
	switch err := s.db.QueryRowContext(ctx, `SELECT revision FROM `+sessionsTable+` WHERE id = ?`, id).Scan(&stored); {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("sqlitestore: delete %q: %w", id, session.ErrNotFound)
	case err != nil:
		return fmt.Errorf("sqlitestore: delete %q at revision %d: %w", id, revision, err)
	}
	return fmt.Errorf("sqlitestore: delete %q at revision %d: stored revision is %d: %w", id, revision, stored, session.ErrStaleRevision)
}
