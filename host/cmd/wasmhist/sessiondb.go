package main

import (
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
func recordedDB(s *session.Session) string {
	for _, k := range slotKeys(s) {
		for _, t := range strings.Fields(s.Provenance[k].Storage) {
			if p, ok := strings.CutPrefix(t, "sqlite:"); ok && p != "" {
				return p
			}
		}
	}
	return ""
}

// historyDB is the database that holds the history of s, for a command
// given no --db: the one s records when it is there; else a file of that
// name beside the session (or in its store's directory), when the two
// moved together; else the default database (dbPath). When none of them
// exists it is the recorded one, so that the error names what is missing.
func (f sessionFile) historyDB(s *session.Session) string {
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
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
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
