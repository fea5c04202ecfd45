package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
)

// postgresDSNEnv is where --store postgres reads its connection string.
const postgresDSNEnv = "WASMHIST_POSTGRES_DSN"

// Kinds of --store.
const (
	storeDir      = "dir"
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
	storeRefused  = "refused" // a connection string on the command line
	storeJSON     = "json"    // a missing FILE.json: a session file, not a store
)

// looksLikeConnString reports whether a flag's value may be a database
// connection string, and so may hold a password: a URL
// (postgres://user:pw@host/db), a key=value string (host=h password=pw),
// anything naming a password, or user:pw@host. A path, a session id or a
// store name has none of these; a flag that refuses such a value must not
// repeat it, since ps, shell history and logs would keep it.
func looksLikeConnString(v string) bool {
	low := strings.ToLower(v)
	if strings.Contains(low, "://") || strings.Contains(v, "=") || strings.Contains(low, "password") {
		return true
	}
	at := strings.LastIndexByte(v, '@')
	return at > 0 && strings.Contains(v[:at], ":")
}

// storeFlag is --store: where sessions are kept, by id. Unset, a session
// is the one file --session names (the embedded default, which needs
// nothing installed).
//
//	--store DIR         a directory, one JSON file per session (store.Dir)
//	--store FILE.db     an SQLite file (host/store/sqlitestore)
//	--store postgres    PostgreSQL, connection string from $WASMHIST_POSTGRES_DSN
//	--store env:VAR     PostgreSQL, connection string from $VAR
//
// A connection string never goes on the command line, where ps and shell
// history would show its password.
type storeFlag struct {
	raw  string
	kind string
	path string // the directory or the SQLite file
	env  string // the variable holding a PostgreSQL connection string
}

func (s *storeFlag) String() string { return s.raw }

func (s *storeFlag) Set(v string) error {
	low := strings.ToLower(v)
	switch {
	case strings.TrimSpace(v) == "":
		return errors.New("--store needs a directory, an SQLite file, postgres or env:VAR")
	case looksLikeConnString(v):
		// Refused when the store is opened: an error returned here would
		// be printed with the value, password and all.
		*s = storeFlag{raw: "(a connection string)", kind: storeRefused}
		return nil
	case low == "postgres" || low == "postgresql":
		*s = storeFlag{raw: v, kind: storePostgres, env: postgresDSNEnv}
		return nil
	case strings.HasPrefix(v, "env:"):
		name := strings.TrimPrefix(v, "env:")
		if name == "" || strings.ContainsAny(name, " $=") {
			return fmt.Errorf("--store %s: name the environment variable holding the connection string, such as env:%s", v, postgresDSNEnv)
		}
		*s = storeFlag{raw: v, kind: storePostgres, env: name}
		return nil
	}
	kind := storeDir
	fi, err := os.Stat(v)
	switch ext := strings.ToLower(filepath.Ext(v)); {
	case err == nil && fi.IsDir(), strings.HasSuffix(v, string(filepath.Separator)):
	case err == nil, ext == ".db", ext == ".sqlite", ext == ".sqlite3":
		kind = storeSQLite
	case ext == ".json":
		// A directory would be created under this name, which is
		// what --session takes: refused when the store is opened.
		kind = storeJSON
	}
	*s = storeFlag{raw: v, kind: kind, path: v}
	return nil
}

// set reports whether --store was given.
func (s *storeFlag) set() bool { return s.kind != "" }

// describe names the store for the status lines and messages, without
// the connection string.
func (s *storeFlag) describe() string {
	switch s.kind {
	case storeDir:
		return "directory " + s.path
	case storeSQLite:
		return "SQLite " + s.path
	case storePostgres:
		return "PostgreSQL ($" + s.env + ")"
	}
	return "none"
}

// storeFlags registers --store on fs.
func storeFlags(fs *flags) *storeFlag {
	s := &storeFlag{}
	fs.Var(s, "store", "sessions by id in a `STORE`: a directory, SQLite file, postgres or env:VAR")
	return s
}

// openedStore is an open --store.
type openedStore struct {
	store.Manager
	close func()
}

// PrepareSave lets the store take part in a run's commit (txn.Stager),
// which every store the command opens does; one that could not would be
// saved at once, before the plugin's database commits.
func (o *openedStore) PrepareSave(ctx context.Context, tx *txn.Txn, s *session.Session) (txn.Prepared, error) {
	if ts, ok := o.Manager.(txn.Stager); ok {
		return ts.PrepareSave(ctx, tx, s)
	}
	if err := o.Save(ctx, s); err != nil {
		return nil, err
	}
	return &txn.Staged{}, nil
}

// open opens the store; the caller closes it.
func (s *storeFlag) open(ctx context.Context, e *env, cmd string) (*openedStore, error) {
	switch s.kind {
	case storeRefused:
		return nil, usagef(cmd, "--store takes no connection string (ps and shell history would show its password): put it in $%s and pass --store postgres, or in another variable and pass --store env:VAR", postgresDSNEnv)
	case storeJSON:
		return nil, usagef(cmd, "--store %s does not exist and names a session file, not a store: pass --session %s, or --store a directory or an SQLite file ending in .db", s.path, s.path)
	case storeDir:
		if fi, err := os.Stat(s.path); err == nil && !fi.IsDir() {
			return nil, usagef(cmd, "--store %s is a file, not a directory: name a directory, or an SQLite file ending in .db", s.path)
		}
		if err := checkDirWritable(cmd, "session store", filepath.Join(s.path, "x")); err != nil {
			return nil, err
		}
		st, err := store.NewDir(s.path)
		if err != nil {
			return nil, failf(cmd, "session store %s: %w: choose a writable directory", s.path, err)
		}
		return &openedStore{Manager: st, close: func() {}}, nil
	case storeSQLite:
		if !isSQLiteOrEmpty(s.path) {
			return nil, usagef(cmd, "--store %s is neither a directory nor an SQLite database: --store takes a directory, an SQLite file ending in .db, postgres or env:VAR", s.path)
		}
		if err := checkDatabase(cmd, s.path); err != nil {
			return nil, err
		}
		st, err := sqlitestore.Open(s.path)
		if err != nil {
			return nil, failf(cmd, "session store %s: %w: pass --store with an SQLite file this program can write", s.path, err)
		}
		return &openedStore{Manager: st, close: func() { st.Close() }}, nil
	case storePostgres:
		dsn := ""
		if e.getenv != nil {
			dsn = e.getenv(s.env)
		}
		if dsn == "" {
			return nil, usagef(cmd, "--store %s: $%s is empty: set it to the PostgreSQL connection string (postgres://USER@HOST/DB, the password in ~/.pgpass or $PGPASSWORD)", s.raw, s.env)
		}
		name, err := pgName(cmd, s.env, dsn)
		if err != nil {
			return nil, err
		}
		// Named as --db postgres names a grant on the same database, so
		// that a run's session row commits with the plugin's writes.
		st, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: name})
		if err != nil {
			return nil, failf(cmd, "session store PostgreSQL ($%s): %w: check the connection string in $%s and that the server is up", s.env, err, s.env)
		}
		return &openedStore{Manager: st, close: func() { st.Close() }}, nil
	}
	return nil, fmt.Errorf("no --store")
}

// defaultDB is the SQLite database a plugin that wants sql gets with
// this store unless --db says otherwise: the store's own file (so the
// plugin's rows and the session row share one database), the session's
// file beside it in a directory, and none for PostgreSQL.
func (s *storeFlag) defaultDB(id string) string {
	switch s.kind {
	case storeDir:
		return filepath.Join(s.path, id+".db")
	case storeSQLite:
		return s.path
	}
	return ""
}
