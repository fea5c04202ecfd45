package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmhist/wasmhist/host/session"
)

// The commands that read a session's history (history, session show,
// validate, delete, export, fork) read it where the session records it:
// a slot's provenance names the SQLite database its plugin was granted
// ("sqlite:/abs/path.db"), whatever --db the chat was given. A session
// moved or restored together with its database is recognised by content
// (package host/agent), so the database is looked for where the
// provenance says, then beside the session under the same name, then at
// the default place; a command that only reads never creates one.

// recordedDB is the SQLite database the provenance of s records for its
// slots (the first slot, by key, that records one), or "".
func recordedDB(s *session.Session) string { return recorded(s, "sqlite:") }

// recordedPostgresName is the name of the PostgreSQL database the
// provenance of s records for its slots, or "".
func recordedPostgresName(s *session.Session) string { return recorded(s, "postgres:") }

// recorded is what follows scheme in the storage the provenance of s
// records for its slots (the first slot, by key, that records one), or "".
func recorded(s *session.Session, scheme string) string {
	for _, k := range slotKeys(s) {
		if v := storageOf(s.Provenance[k].Storage, scheme); v != "" {
			return v
		}
	}
	return ""
}

// storageOf is what follows scheme in a provenance's storage (its
// targets, space-separated), or "".
func storageOf(storage, scheme string) string {
	for _, t := range strings.Fields(storage) {
		if v, ok := strings.CutPrefix(t, scheme); ok && v != "" {
			return v
		}
	}
	return ""
}

// isFile reports whether path is a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// recordedPostgres is the --db value of the PostgreSQL --store that holds
// s (postgres, or env:VAR), when the provenance of s records its history
// in a database of the name the store's connection string reaches
// ("postgres:NAME"): the store and the history are then on the server the
// user named for this session. "" otherwise. A name alone does not say
// which server, so no other connection string is tried: a session file
// naming "postgres:app" must not have a read command set up a plugin's
// role and schema in whatever database of that name $WASMHIST_POSTGRES_DSN
// reaches.
func (f sessionFile) recordedPostgres(e *env, s *session.Session) string {
	name := recordedPostgresName(s)
	if name == "" || f.pgEnv == "" || e.getenv == nil {
		return ""
	}
	if db, err := dsnDatabase(e.getenv(f.pgEnv)); err != nil || db != name {
		return ""
	}
	if f.pgEnv == postgresDSNEnv {
		return "postgres"
	}
	return "env:" + f.pgEnv
}

// needDB is the advice for a plugin that keeps history in a database
// when no --db was given and none could be found for the session s
// (nil for a new one): which --db to pass.
func needDB(s *session.Session) string {
	if s != nil {
		if name := recordedPostgresName(s); name != "" {
			return fmt.Sprintf("the session keeps its history in PostgreSQL database %s: pass --db postgres (or --db env:VAR) with a connection string that reaches it", name)
		}
		if rec := recordedDB(s); rec != "" {
			return fmt.Sprintf("the session keeps its history in %s: pass --db with it, or with the copy taken with the session", rec)
		}
	}
	return "pass --db PATH, the plugin's SQLite database, or --db postgres (or --db env:VAR) to keep it in PostgreSQL"
}

// historyDB is the database that holds the history of s, for a command
// given no --db: for a history s records in PostgreSQL, its --store's
// database when that is the one (recordedPostgres), else none (""; needDB
// says what to pass); the SQLite file s records when it is there; else a
// file of that name beside the session (or in its store's directory),
// when the two moved together; else the default database (dbPath). When
// none of them exists it is the recorded one, so that the error names
// what is missing.
func (f sessionFile) historyDB(e *env, s *session.Session) string {
	if recordedPostgresName(s) != "" {
		return f.recordedPostgres(e, s)
	}
	rec := recordedDB(s)
	if rec == "" {
		return f.dbPath()
	}
	if abs, err := filepath.Abs(f.dbPath()); err == nil && abs == rec {
		return f.dbPath() // as the user named it
	}
	candidates := []string{rec}
	if f.dir != "" {
		candidates = append(candidates, filepath.Join(f.dir, filepath.Base(rec)))
	}
	if d := f.dbPath(); d != "" {
		candidates = append(candidates, d)
	}
	for _, c := range candidates {
		if isFile(c) {
			return c
		}
	}
	return rec
}

// home is the directory a store keeps its files in, where a database
// moved with the store is looked for; "" for PostgreSQL.
func (s *storeFlag) home() string {
	switch s.kind {
	case storeDir:
		return s.path
	case storeSQLite:
		return filepath.Dir(s.path)
	}
	return ""
}
