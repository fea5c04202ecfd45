package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
)

// pgPluginSchema is the PostgreSQL schema --db postgres grants a plugin;
// the host's rows (the journal, and the sessions of --store postgres on
// the same database) are in pgstore's schema, "wasmhist".
const pgPluginSchema = "history"

// pgDBEnv reports whether --db names PostgreSQL (postgres, postgresql or
// env:VAR, as --store does), and the variable holding its connection
// string.
func pgDBEnv(db string) (string, bool) {
	switch low := strings.ToLower(db); {
	case low == "postgres" || low == "postgresql":
		return postgresDSNEnv, true
	case strings.HasPrefix(db, "env:") && len(db) > len("env:"):
		return strings.TrimPrefix(db, "env:"), true
	}
	return "", false
}

// pgName names the database of a connection string for the txn target
// and provenance ("postgres:NAME"): its database name, never a secret. A
// session store and a grant on one database get the same name, so a
// run's session row commits with its plugin's writes.
func pgName(cmd, env, dsn string) (string, error) {
	name, err := dsnDatabase(dsn)
	if err != nil {
		// The error may quote the string: say only where it came from.
		return "", usagef(cmd, "$%s is not a PostgreSQL connection string: set it as postgres://USER@HOST/DB", env)
	}
	return name, nil
}

// dsnDatabase is the name of the database a connection string reaches:
// its database, or the user's name, as the server defaults it.
func dsnDatabase(dsn string) (string, error) {
	if dsn == "" {
		return "", errors.New("no connection string")
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	if cfg.Database == "" {
		return cfg.User, nil
	}
	return cfg.Database, nil
}

// dbGrantsFor grants the sql capability on --db db: an SQLite file
// (dbGrants), or with postgres or env:VAR a PostgreSQL schema of the
// database whose connection string is in $WASMHIST_POSTGRES_DSN or $VAR
// (never on the command line, where ps and shell history would show its
// password).
func dbGrantsFor(e *env, cmd, db string) ([]host.Grant, error) {
	v, ok := pgDBEnv(db)
	if !ok {
		return dbGrants(cmd, db)
	}
	dsn := ""
	if e.getenv != nil {
		dsn = e.getenv(v)
	}
	if dsn == "" {
		return nil, usagef(cmd, "--db %s: $%s is empty: set it to the PostgreSQL connection string (postgres://USER@HOST/DB, the password in ~/.pgpass or $PGPASSWORD)", db, v)
	}
	name, err := pgName(cmd, v, dsn)
	if err != nil {
		return nil, err
	}
	return []host.Grant{pggrant.New(pggrant.Config{Name: name, AdminDSN: dsn, Schema: pgPluginSchema})}, nil
}

// dbGrants grants the sql capability on the database at path. The grant
// is lazy: the file is created by the first statement a plugin runs, so a
// plugin that does not use sql leaves no file behind. --db postgres and
// env:VAR need the environment: see dbGrantsFor.
func dbGrants(cmd, path string) ([]host.Grant, error) {
	if v, ok := pgDBEnv(path); ok {
		return nil, usagef(cmd, "--db %s (PostgreSQL, from $%s) is not supported by this command: pass the plugin's SQLite file", path, v)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, failf(cmd, "database path %s: %w", path, err)
	}
	if err := checkDatabaseDir(cmd, path); err != nil {
		return nil, err
	}
	return []host.Grant{sqlgrant.New(sqlgrant.Config{Path: abs})}, nil
}

// checkDatabaseDir refuses an existing database whose directory takes no
// new file: the plugins' databases keep a write-ahead log, and SQLite
// creates its -wal and -shm files beside the database even to read it, so
// even a read-only command such as history could not open it.
func checkDatabaseDir(cmd, path string) error {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return nil // a new database: the commands that create one check its directory
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".wasmhist-check-*")
	if err != nil {
		return failf(cmd, "database %s: its directory %s is not writable, and SQLite creates the write-ahead log's %s-shm there even to read it: run as a user who can write %s, or copy the session and its database to a writable directory", path, dir, filepath.Base(path), dir)
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return nil
}

// scratchGrants grants the sql capability on a database in a new temporary
// directory, for commands that run a plugin without keeping what it stores
// (inspect, conformance). cleanup removes the directory.
func scratchGrants(cmd string) (grants []host.Grant, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "wasmhist-scratch-")
	if err != nil {
		return nil, nil, failf(cmd, "creating a scratch database directory: %w: check that the temporary directory is writable", err)
	}
	return []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "scratch.db")})}, func() { os.RemoveAll(dir) }, nil
}
