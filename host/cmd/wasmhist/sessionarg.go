package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/host/session"
)

// sessionArg is the session the arguments name: a session file, or with
// --store the session of an id in that store. Every command that works on
// one named session finds it, describes it and reports on it through this
// type; the caller closes it (which closes the store, if one was opened).
type sessionArg struct {
	cmd   string
	store *storeFlag // --store; unset, name is a session file
	name  string     // the session file, or with --store the session's id
	// byFlag: named by --session (chat, history) rather than by the one
	// argument of a session subcommand; the messages name what was given.
	byFlag bool
	st     *openedStore // the open store; nil without --store
}

// sessionArgument is the session named by the one argument of a session
// subcommand: FILE, or with --store an ID.
func sessionArgument(cmd string, store *storeFlag, pos []string) (*sessionArg, error) {
	what := "FILE"
	if store.set() {
		what = "ID"
	}
	name, err := onePath(cmd, what, pos)
	if err != nil {
		return nil, err
	}
	return &sessionArg{cmd: cmd, store: store, name: name}, nil
}

// sessionFlagArg is the session named by --session (a file, or with
// --store an id; "" with --store lets chat start a session of a new id).
func sessionFlagArg(cmd string, store *storeFlag, name string) *sessionArg {
	return &sessionArg{cmd: cmd, store: store, name: name, byFlag: true}
}

// inStore reports whether the session is in a --store.
func (a *sessionArg) inStore() bool { return a.store.set() }

// close closes the store, if one is open. It may be called more than once.
func (a *sessionArg) close() {
	if a.st != nil {
		a.st.close()
		a.st = nil
	}
}

// openStore opens the --store once.
func (a *sessionArg) openStore(ctx context.Context, e *env) error {
	if a.st != nil {
		return nil
	}
	st, err := a.store.open(ctx, e, a.cmd)
	if err != nil {
		return err
	}
	a.st = st
	return nil
}

// where is how messages name the session: "session ID in STORE", else the
// file ("session file FILE" when --session named it). id is the session's
// id once loaded ("" before).
func (a *sessionArg) where(id string) string {
	if a.inStore() {
		if id == "" {
			id = a.name
		}
		return fmt.Sprintf("session %s in %s", id, a.store.describe())
	}
	if a.byFlag {
		return "session file " + a.name
	}
	return a.name
}

// file is the session as a sessionFile: its path and default database; in
// a store, its place there.
func (a *sessionArg) file() (sessionFile, error) {
	if a.inStore() {
		f := sessionFile{path: a.where(""), dir: a.store.home(), name: a.name, inStore: true, db: a.store.defaultDB(a.name)}
		if a.store.kind == storePostgres {
			f.pgEnv = a.store.env
		}
		return f, nil
	}
	return parseSessionFile(a.cmd, a.name)
}

// loadStored loads the session of id from the store, which it opens, and
// checks it against the session schema (a directory store's Load does not
// check everything), returning it with its bytes. An error says which of
// the two failed, and where.
func (a *sessionArg) loadStored(ctx context.Context, e *env, id string) (*session.Session, []byte, error) {
	if err := a.openStore(ctx, e); err != nil {
		return nil, nil, err
	}
	s, err := a.st.Load(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", a.where(id), err)
	}
	raw, err := session.Encode(s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a valid session: %w", a.where(id), err)
	}
	return s, raw, nil
}

// read reads the session as the session subcommands do: it must exist
// and be valid. It returns the session with its bytes as stored (in a
// store, as encoded) and its sessionFile.
func (a *sessionArg) read(ctx context.Context, e *env) (*session.Session, []byte, sessionFile, error) {
	if !a.inStore() {
		s, raw, err := readSessionFile(a.cmd, a.name)
		if err != nil {
			return nil, nil, sessionFile{}, err
		}
		f, err := parseSessionFile(a.cmd, a.name)
		return s, raw, f, err
	}
	// A store that cannot be opened says why itself, with its advice.
	if err := a.openStore(ctx, e); err != nil {
		a.close()
		return nil, nil, sessionFile{}, err
	}
	s, raw, err := a.loadStored(ctx, e, a.name)
	if err != nil {
		a.close()
		return nil, nil, sessionFile{}, failf(a.cmd, "%w: %s", err,
			a.loadAdvice(err, fmt.Sprintf("check the id ('wasmhist session list --store %s' lists them)", a.store.raw)))
	}
	f, _ := a.file()
	return s, raw, f, nil
}

// load loads the session --session names, which must exist.
func (a *sessionArg) load(ctx context.Context, e *env) (*session.Session, error) {
	if !a.inStore() {
		f, err := parseSessionFile(a.cmd, a.name)
		if err != nil {
			return nil, err
		}
		return f.load(a.cmd)
	}
	// A store that cannot be opened says why itself, with its advice.
	if err := a.openStore(ctx, e); err != nil {
		return nil, err
	}
	s, _, err := a.loadStored(ctx, e, a.name)
	if err != nil {
		return nil, failf(a.cmd, "%w: %s", err,
			a.loadAdvice(err, fmt.Sprintf("check --session (the session's id; 'wasmhist session list --store %s' lists them)", a.store.raw)))
	}
	return s, nil
}

// loadOrNew loads the session --session names, or returns a new one of
// that id (created=true) when there is none yet; the first commit writes
// it. In a store, "" is a new session of a new id.
func (a *sessionArg) loadOrNew(ctx context.Context, e *env) (s *session.Session, created bool, err error) {
	if !a.inStore() {
		f, err := parseSessionFile(a.cmd, a.name)
		if err != nil {
			return nil, false, err
		}
		return f.open(a.cmd)
	}
	s = session.New()
	if a.name != "" {
		s.SessionID = a.name
	}
	if err := a.openStore(ctx, e); err != nil {
		return nil, false, err
	}
	switch old, _, err := a.loadStored(ctx, e, s.SessionID); {
	case errors.Is(err, session.ErrNotFound):
		return s, true, nil
	case err != nil:
		return nil, false, failf(a.cmd, "%w: %s", err,
			a.loadAdvice(err, "check --session (the session's id) and the store"))
	default:
		return old, false, nil
	}
}

// corrupt reports whether err says the session is stored in a --store but
// is not a valid session: the row (or file) is there and cannot be loaded.
func (a *sessionArg) corrupt(err error) bool {
	return a.inStore() && errors.Is(err, session.ErrInvalid) && !errors.Is(err, session.ErrNotFound)
}

// loadAdvice is the advice for a session the store could not load: for a
// corrupt one, how to remove or replace it; else otherwise.
func (a *sessionArg) loadAdvice(err error, otherwise string) string {
	if !a.corrupt(err) {
		return otherwise
	}
	return fmt.Sprintf("the stored session is corrupt: 'wasmhist session delete --force --store %s %s' removes it, 'wasmhist session import --force --store %s' replaces it",
		a.store.raw, a.name, a.store.raw)
}

// removeCorrupt removes a stored session that is corrupt (and only such a
// one), for --force: its slots cannot be read, so what its plugins stored
// outside it stays. The store's own delete is used where it can find the
// revision of a row it cannot load (SQLite, PostgreSQL); a directory
// store's delete loads the file first, so its file is removed here.
func (a *sessionArg) removeCorrupt(ctx context.Context, e *env) error {
	if err := a.openStore(ctx, e); err != nil {
		return err
	}
	where := a.where("")
	if _, _, err := a.loadStored(ctx, e, a.name); !a.corrupt(err) {
		return failf(a.cmd, "%s is no longer corrupt (%v): run the command again", where, err)
	}
	if a.store.kind == storeDir {
		if err := os.Remove(filepath.Join(a.store.path, a.name+".json")); err != nil {
			return failf(a.cmd, "removing %s: %w: check the directory's permissions", where, err)
		}
		return nil
	}
	infos, err := a.st.List(ctx)
	if err != nil {
		return failf(a.cmd, "listing %s: %w: check the store", a.store.describe(), err)
	}
	i := slices.IndexFunc(infos, func(in store.Info) bool { return in.SessionID == a.name })
	if i < 0 {
		return failf(a.cmd, "%s is gone: nothing to remove", where)
	}
	if err := a.st.Delete(ctx, a.name, infos[i].Revision); err != nil {
		return failf(a.cmd, "deleting %s: %w: run the command again when no chat is using it", where, err)
	}
	return nil
}

// readSessionFile reads and validates the session at path against the
// session schema, and returns it with the bytes as stored.
func readSessionFile(cmd, path string) (*session.Session, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, failf(cmd, "reading %s: %w: check the path", path, err)
	}
	s, err := decodeSession(b)
	if err != nil {
		return nil, nil, failf(cmd, "%s is not a valid session: %w: fix the file at the place named, or start a new session", path, err)
	}
	return s, b, nil
}

// defaultDB is the SQLite database a plugin that wants sql gets for the
// session of id unless --db says otherwise: see sessionFile.dbPath and
// storeFlag.defaultDB.
func (a *sessionArg) defaultDB(id string) string {
	if a.inStore() {
		return a.store.defaultDB(id)
	}
	f, err := parseSessionFile(a.cmd, a.name)
	if err != nil {
		return ""
	}
	return f.dbPath()
}
