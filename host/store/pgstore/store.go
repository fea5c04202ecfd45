// Package pgstore keeps agent sessions in PostgreSQL, one row a session:
// an store.Store and store.Manager that hosts on many
// machines may share.
//
// The store works only in a schema of its own ("wasmhist" unless
// Config.Schema says otherwise), which it creates with its tables when
// missing; it never reads or writes another schema and never changes the
// connection's search_path. A row holds the session's JSON exactly as
// session.Encode wrote it (a json column keeps its input text, so each
// state slot's bytes come back as they were stored; jsonb would reorder
// keys and respace them) and its revision in a column of its own, which
// Save checks in the statement that writes: of two writers that loaded
// one revision, the second is refused with session.ErrStaleRevision.
//
// It is a package of its own so that a program that imports only
// host/agent links no PostgreSQL driver.
package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
)

// DefaultSchema is the schema a zero Config.Schema means.
const DefaultSchema = "wasmhist"

// schemaVersion is the layout of the tables this version writes. Open
// records it in the store_version table so that a later version knows
// what to migrate, and refuses a schema a later version has migrated
// (newer than txn.PostgresRotatedLayout, the same tables after a host
// key rotation).
const schemaVersion = txn.PostgresSessionsLayout

// Config says where the store lives. Its zero value, with a DSN, is the
// common case.
type Config struct {
	// DSN is a PostgreSQL connection string, in URL or key=value form.
	DSN string
	// Schema is the schema the store keeps its tables in; empty means
	// DefaultSchema.
	Schema string
	// Name names the database for Target: give it the Name of the sql
	// grants (host/pggrant) on the same database, so that a run's session
	// row commits in the transaction of its plugin's writes. Never a
	// secret: it appears in messages.
	Name string
}

// Store is a session store in one PostgreSQL schema. It is safe for
// concurrent use; Close releases its connection pool.
type Store struct {
	name     string
	pool     *pgxpool.Pool
	schema   string
	sessions string // the quoted, schema-qualified sessions table
}

var (
	_ store.Manager = (*Store)(nil)
	_ txn.Stager    = (*Store)(nil)
)

// Open connects to the database at dsn and opens the store in
// DefaultSchema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenConfig(ctx, Config{DSN: dsn})
}

// OpenConfig connects as cfg says and creates the store's schema and
// tables when they are missing.
func OpenConfig(ctx context.Context, cfg Config) (*Store, error) {
	schema := cfg.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	pool, err := pgxpool.New(ctx, cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s := &Store{name: cfg.Name, pool: pool, schema: schema, sessions: pgx.Identifier{schema, "sessions"}.Sanitize()}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	fail := func(err error) error { return fmt.Errorf("pgstore: open schema %q: %w", s.schema, err) }
	qs := pgx.Identifier{s.schema}.Sanitize()
	// CREATE ... IF NOT EXISTS is not safe against itself: two hosts
	// opening a new schema at once could both try to create it. They take
	// turns on the schema's host lock, a row no plugin role may lock (see
	// package txn), held until the transaction ends; stores in other schemas
	// do not wait.
	if err := txn.PostgresBootstrapRun(ctx, qs, func(ctx context.Context, q string) error {
		_, err := s.pool.Exec(ctx, q)
		return err
	}); err != nil {
		return fail(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, txn.PostgresLock(qs)); err != nil {
		return fail(err)
	}
	version := pgx.Identifier{s.schema, "store_version"}.Sanitize()
	// The layout is shared with the sql capability (host/pggrant), which
	// writes a run's session row in the plugin's transaction.
	for _, q := range txn.PostgresSessions(qs) {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fail(err)
		}
	}
	var v *int
	if err := tx.QueryRow(ctx, `SELECT max(version) FROM `+version).Scan(&v); err != nil {
		return fail(err)
	}
	switch {
	case v == nil:
		if _, err := tx.Exec(ctx, `INSERT INTO `+version+` (version) VALUES ($1)`, schemaVersion); err != nil {
			return fail(err)
		}
	case *v > txn.PostgresRotatedLayout:
		return fail(fmt.Errorf("the sessions tables are at version %d, newer than this program's %d: upgrade the program", *v, txn.PostgresRotatedLayout))
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return nil
}

// Target returns "postgres:<Config.Name>", the txn target (package
// host/internal/txn) under which a grant of host/pggrant with the same Name keeps a
// run's transaction, or "" when the store has no Name. When a run's Txn
// holds that target, the agent writes the session row through the Txn
// (txn.Sessions; the table is this store's sessions table when both use
// the same schema) instead of calling Save, so the row and the plugin's
// writes commit together; the revision check is Save's.
func (s *Store) Target() string {
	if s.name == "" {
		return ""
	}
	return txn.PostgresTarget(s.name)
}

// Close closes the connection pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Load implements store.Store. A row that is not a valid session
// is an error wrapping session.ErrInvalid that names the row and says
// where in its JSON the problem is.
func (s *Store) Load(ctx context.Context, id string) (*session.Session, error) {
	var (
		rev  int64
		data string
	)
	err := s.pool.QueryRow(ctx, `SELECT revision, data FROM `+s.sessions+` WHERE id = $1`, id).Scan(&rev, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: load %q: %w", id, session.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: load %q: %w", id, err)
	}
	sess, err := session.Decode([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("pgstore: load %q: table %s row %q: %w", id, s.sessions, id, err)
	}
	if sess.SessionID != id || sess.Revision != rev {
		return nil, fmt.Errorf("pgstore: load %q: table %s row %q: %w: the row is session %q at revision %d, but its JSON says session %q at revision %d",
			id, s.sessions, id, session.ErrInvalid, id, rev, sess.SessionID, sess.Revision)
	}
	return sess, nil
}

// Save implements store.Saver. The revision check is the upsert's
// WHERE clause: INSERT ... ON CONFLICT DO UPDATE locks the conflicting row
// (waiting for a concurrent writer of it to commit) and evaluates the
// WHERE on its latest committed version, so no write lands between the
// check and this one.
func (s *Store) Save(ctx context.Context, sess *session.Session) error {
	p, err := s.PrepareSave(ctx, nil, sess)
	if err != nil {
		return err
	}
	return p.Commit(ctx)
}

// PrepareSave implements txn.Stager. When tx holds a run's transaction
// on the store's database (a grant of host/pggrant with the store's Name
// wrote during the run), the row is written into it, through the host's
// functions, and commits with the plugin's writes. Otherwise the row is
// written in a transaction of the store's own, which holds the row's lock
// until Commit.
func (s *Store) PrepareSave(ctx context.Context, tx *txn.Txn, sess *session.Session) (txn.Prepared, error) {
	data, err := session.Encode(sess)
	if err != nil {
		return nil, fmt.Errorf("pgstore: save: %w", err)
	}
	if sess.SessionID == "" {
		return nil, fmt.Errorf("pgstore: save: %w: empty session id", session.ErrInvalid)
	}
	if prep, err := tx.StageSession(ctx, s.Target(), sess, data); prep != nil || err != nil {
		if err != nil {
			return nil, fmt.Errorf("pgstore: save %q at revision %d: %w", sess.SessionID, sess.Revision, err)
		}
		return prep, nil
	}
	own, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: save %q at revision %d: %w", sess.SessionID, sess.Revision, err)
	}
	tag, err := own.Exec(ctx, `INSERT INTO `+s.sessions+` AS s (id, revision, updated, data) VALUES ($1, $2, pg_catalog.now(), $3)
		ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, updated = excluded.updated, data = excluded.data
		WHERE s.revision < excluded.revision`,
		sess.SessionID, sess.Revision, string(data))
	if err != nil {
		own.Rollback(ctx)
		return nil, fmt.Errorf("pgstore: save %q at revision %d: %w", sess.SessionID, sess.Revision, err)
	}
	if tag.RowsAffected() == 0 {
		// Nothing was written, so the row exists and its revision is not
		// lower. Reading it again is only for the message.
		var stored int64
		own.QueryRow(ctx, `SELECT revision FROM `+s.sessions+` WHERE id = $1`, sess.SessionID).Scan(&stored)
		own.Rollback(ctx)
		return nil, fmt.Errorf("pgstore: save %q at revision %d: stored revision is %d: %w",
			sess.SessionID, sess.Revision, stored, session.ErrStaleRevision)
	}
	return &txn.Staged{
		OnCommit: func(ctx context.Context) error {
			if err := own.Commit(context.WithoutCancel(ctx)); err != nil {
				return fmt.Errorf("pgstore: save %q at revision %d: %w", sess.SessionID, sess.Revision, err)
			}
			return nil
		},
		OnAbort: func() { own.Rollback(context.Background()) },
	}, nil
}

// List implements store.Manager. Updated is the database server's
// time of the save.
func (s *Store) List(ctx context.Context) ([]store.Info, error) {
	// COLLATE "C": ordered by bytes, as Go compares strings, whatever the
	// database's locale.
	rows, err := s.pool.Query(ctx, `SELECT id, revision, updated FROM `+s.sessions+` ORDER BY id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	infos, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Info, error) {
		var in store.Info
		err := r.Scan(&in.SessionID, &in.Revision, &in.Updated)
		return in, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	return infos, nil
}

// Delete implements store.Manager. Like Save, it checks the
// revision in the statement that deletes.
func (s *Store) Delete(ctx context.Context, id string, revision int64) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.sessions+` WHERE id = $1 AND revision = $2`, id, revision)
	if err != nil {
		return fmt.Errorf("pgstore: delete %q at revision %d: %w", id, revision, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	// Only to say why nothing was deleted.
	var stored int64
	switch err := s.pool.QueryRow(ctx, `SELECT revision FROM `+s.sessions+` WHERE id = $1`, id).Scan(&stored); {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: delete %q: %w", id, session.ErrNotFound)
	case err != nil:
		return fmt.Errorf("pgstore: delete %q at revision %d: %w", id, revision, err)
	}
	return fmt.Errorf("pgstore: delete %q at revision %d: stored revision is %d: %w", id, revision, stored, session.ErrStaleRevision)
}
