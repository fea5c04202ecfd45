package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"
)

// sessionFile is a --session FILE: a agent.FileStore holds sessions as
// <dir>/<session id>.json, so the file's base name is the session id.
type sessionFile struct {
	path string
	dir  string
	id   string
}

func parseSessionFile(cmd, path string) (sessionFile, error) {
	base := filepath.Base(path)
	id, ok := strings.CutSuffix(base, ".json")
	if !ok || id == "" || strings.HasPrefix(id, ".") {
		return sessionFile{}, usagef(cmd, "session file %q: the name must be <session id>.json (the file store names each file after its session): use for example --session %s.json", path, strings.TrimSuffix(base, ".json"))
	}
	return sessionFile{path: path, dir: filepath.Dir(path), id: id}, nil
}

// dbPath is the default database of a plugin that stores through sql:
// beside the session file, with the same base name.
func (f sessionFile) dbPath() string {
	return filepath.Join(f.dir, f.id+".db")
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
	if s.SessionID != f.id {
		return nil, failf(cmd, "session file %s holds session %q, but the file store expects %q in it (the file was renamed?): rename it back to %s.json",
			f.path, s.SessionID, f.id, s.SessionID)
	}
	return s, nil
}

// open loads the session, or returns a new one (created=true) when the
// file does not exist yet. The new session is written by the first commit.
func (f sessionFile) open(cmd string) (s *session.Session, created bool, err error) {
	s, err = f.load(cmd)
	if errors.Is(err, os.ErrNotExist) {
		s = session.New()
		s.SessionID = f.id
		return s, true, nil
	}
	return s, false, err
}

// store is the host's file store over the session file's directory.
func (f sessionFile) store(cmd string) (*agent.FileStore, error) {
	st, err := agent.NewFileStore(f.dir)
	if err != nil {
		return nil, failf(cmd, "session directory %s: %w", f.dir, err)
	}
	return st, nil
}

// describe is what the commands print about where a session lives.
func (f sessionFile) describe(s *session.Session) string {
	return fmt.Sprintf("%s (session %s, revision %d)", f.path, s.SessionID, s.Revision)
}
