package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/host/session"
)

// sessionFile is a --session FILE, kept by an store.File: any name
// will do, so a copied session file resumes. A new session's id is the
// file's name without its extension.
type sessionFile struct {
	path string
	dir  string
	name string // the base name without its extension
	// inStore: the session is in a --store, whose plugin database is db
	// ("" when the store chooses none: --db is then required).
	inStore bool
	db      string
	// pgEnv is the variable holding the connection string of a
	// PostgreSQL --store, where a session's history may be too.
	pgEnv string
}

func parseSessionFile(cmd, path string) (sessionFile, error) {
	base := filepath.Base(path)
	name := strings.TrimSuffix(base, filepath.Ext(base))
	if name == "" || strings.HasPrefix(base, ".") || strings.HasSuffix(path, string(filepath.Separator)) {
		return sessionFile{}, usagef(cmd, "session file %q: name a file, such as --session chat.json", path)
	}
	return sessionFile{path: path, dir: filepath.Dir(path), name: name}, nil
}

// dbPath is the default database of a plugin that stores through sql:
// beside the session file, with the same base name.
func (f sessionFile) dbPath() string {
	if f.inStore {
		return f.db
	}
	return filepath.Join(f.dir, f.name+".db")
}

// load reads and validates the session file. A missing file is reported
// with an error wrapping os.ErrNotExist.
func (f sessionFile) load(cmd string) (*session.Session, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, failf(cmd, "session file %s: %w: check the path, or start the session with 'wasmhist chat --session %s'", f.path, os.ErrNotExist, f.path)
		}
		return nil, failf(cmd, "reading session file %s: %w: check the path; its directory must be a directory you can write", f.path, err)
	}
	s, err := decodeSession(b)
	if err != nil {
		return nil, failf(cmd, "session file %s is not a valid session: %w: run 'wasmhist session validate %s', then fix or remove the file", f.path, err, f.path)
	}
	return s, nil
}

// open loads the session, or returns a new one (created=true) when the
// file does not exist yet. The new session is written by the first commit.
func (f sessionFile) open(cmd string) (s *session.Session, created bool, err error) {
	s, err = f.load(cmd)
	if errors.Is(err, os.ErrNotExist) {
		s = session.New()
		s.SessionID = f.name
		return s, true, nil
	}
	return s, false, err
}

// store is what saves the session file.
func (f sessionFile) store(cmd string) (*store.File, error) {
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return nil, failf(cmd, "session directory %s: %w: choose a writable place", f.dir, err)
	}
	return store.NewFile(f.path), nil
}

// describe is what the commands print about where a session lives.
func (f sessionFile) describe(s *session.Session) string {
	return fmt.Sprintf("%s (session %s, revision %d)", f.path, s.SessionID, s.Revision)
}
