// This file is the layout of the rows the host keeps in a database
// next to a plugin's data: the session store's sessions and the commit
// journal. The session stores and the sql capabilities both write them, so
// a run's session row and its plugin writes can commit in one transaction.
//
// The tables' names start with "wasmhist_", a prefix the sql capability
// keeps from plugins: a plugin's statements can neither read nor write them.

package txn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
)

// Prefix starts the name of every host table; plugins may not use it.
const Prefix = "wasmhist_"

// PostgreSQL: the host's tables live in a schema of their own (the session
// store's, "wasmhist" by default), never in a plugin's. Hosts that create
// or change that schema take turns on the row of its host_lock table
// (PostgresLock), which PostgresBootstrap creates: plugin roles have no
// privilege on the table, so no plugin can hold that lock, unlike an
// advisory lock, whose key anyone can compute and take.

// PostgresBootstrap returns the statements that create the schema qs
// (quoted) and its host_lock table with its one row, if missing. Run them
// with PostgresBootstrapRun, outside the transaction that takes the lock.
func PostgresBootstrap(qs string) []string {
	return []string{
		`CREATE SCHEMA IF NOT EXISTS ` + qs,
		`CREATE TABLE IF NOT EXISTS ` + qs + `.host_lock (one boolean PRIMARY KEY DEFAULT true CHECK (one))`,
		`REVOKE ALL ON ` + qs + `.host_lock FROM PUBLIC`,
		`INSERT INTO ` + qs + `.host_lock (one) VALUES (true) ON CONFLICT DO NOTHING`,
	}
}

// PostgresBootstrapRun runs PostgresBootstrap(qs) through exec, each
// statement in a transaction of its own, again when a host creating the
// same schema at the same moment made one fail (a unique violation on the
// catalog, or a duplicate schema or table): every statement is idempotent.
func PostgresBootstrapRun(ctx context.Context, qs string, exec func(ctx context.Context, sql string) error) error {
	return PostgresRetry(ctx, func() error {
		for _, q := range PostgresBootstrap(qs) {
			if err := exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// PostgresRetry runs f, up to five times, while it fails as two hosts
// changing the same catalog rows at the same moment make it fail
// (raceCodes): f's work must be idempotent and undone by its failure, a
// transaction of its own. The host lock does not spare that: a host's
// PostgresBootstrap runs outside it, and its REVOKE on host_lock updates
// the row that a REVOKE ON ALL TABLES under the lock updates too.
func PostgresRetry(ctx context.Context, f func() error) error {
	var err error
	for range 5 {
		err = f()
		var se interface{ SQLState() string }
		if err == nil || !errors.As(err, &se) || !raceCodes[se.SQLState()] || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// raceCodes are the SQLSTATEs of two concurrent CREATE ... IF NOT EXISTS:
// unique_violation, duplicate_schema, duplicate_table, duplicate_object
// (the table's row type), deadlock_detected, and internal_error ("tuple
// concurrently updated").
var raceCodes = map[string]bool{"23505": true, "42P06": true, "42P07": true, "42710": true, "40P01": true, "XX000": true}

// PostgresLock takes the host lock of the schema qs (quoted) until the
// transaction ends.
func PostgresLock(qs string) string {
	return `SELECT one FROM ` + qs + `.host_lock FOR UPDATE`
}

// PostgresSessionsLayout is the version of the session store's tables that
// PostgresSessions creates; the store records it in store_version.
const PostgresSessionsLayout = 1

// PostgresRotatedLayout is the version a rotation of the host key records
// (pgcap.RotateKey) in store_version: the tables are
// PostgresSessionsLayout's, and it is the newest version this program
// reads. Programs from before key rotation refuse it ("upgrade the
// program"): they would give plugin roles the old key's passwords again,
// and the oldest of them pass the key to a statement a plugin's trigger
// can read it in.
const PostgresRotatedLayout = 2

// PostgresSessions creates the session store's tables in the schema qs
// (quoted) if missing: store_version, and sessions with one row a session,
// its revision, when it was written and its JSON as session.Encode wrote it
// (json, not jsonb, keeps the text as written).
func PostgresSessions(qs string) []string {
	return []string{
		`CREATE SCHEMA IF NOT EXISTS ` + qs,
		`CREATE TABLE IF NOT EXISTS ` + qs + `.store_version (version integer NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + qs + `.sessions (
			id text PRIMARY KEY,
			revision bigint NOT NULL,
			updated timestamptz NOT NULL,
			data json NOT NULL -- the session, as session.Encode wrote it
		)`,
	}
}

// SQLite table names.
const (
	SessionsTable = "wasmhist_sessions"
	JournalTable  = "wasmhist_journal"
	VersionTable  = "wasmhist_store_version"
)

// SQLiteTable is the SQLite table of t.
func SQLiteTable(t Table) (string, error) {
	switch t {
	case Sessions:
		return SessionsTable, nil
	case Journal:
		return JournalTable, nil
	}
	return "", fmt.Errorf("hostrows: unknown table %q", t)
}

// SQLiteCreate creates table (SessionsTable or JournalTable) if missing.
// Both have one layout: the session id, its revision, when it was written
// (Unix microseconds) and the session JSON as session.Encode wrote it.
func SQLiteCreate(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
		id TEXT PRIMARY KEY,
		revision INTEGER NOT NULL,
		updated_us INTEGER NOT NULL, -- Unix time in microseconds
		data TEXT NOT NULL           -- the session, as session.Encode wrote it
	) STRICT`
}

// SQLiteUpsert writes a row (id, revision, updated_us, data) unless the
// stored one's revision is not lower: the revision check runs in the
// statement that writes, under SQLite's write lock. Zero rows affected
// means stale.
func SQLiteUpsert(table string) string {
	return `INSERT INTO ` + table + ` (id, revision, updated_us, data) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, updated_us = excluded.updated_us, data = excluded.data
		WHERE ` + table + `.revision < excluded.revision`
}

// SQLiteSelect reads (revision, data) of one id.
func SQLiteSelect(table string) string {
	return `SELECT revision, data FROM ` + table + ` WHERE id = ?`
}

// PostgresTarget is the txn target naming the PostgreSQL database of a
// grant or session store called name, the same for both, so that a
// session store in the grant's database joins its transaction.
func PostgresTarget(name string) string { return "postgres:" + name }

// SQLiteTarget is the txn target naming the SQLite database at path, the
// same for the sql capability's grant and for a session store on that file.
func SQLiteTarget(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("database path %q: %w", path, err)
	}
	return "sqlite:" + abs, nil
}

// SQLiteDelete removes the row of one id.
func SQLiteDelete(table string) string {
	return `DELETE FROM ` + table + ` WHERE id = ?`
}
