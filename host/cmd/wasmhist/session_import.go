package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/wasmhist/wasmhist/host/session"
)

// importRaw is session import of a session file as stored (what
// 'session export --raw' prints): it is written as it is, its state
// included, into FILE or with --store into the store.
// Like session validate, it has each slot's plugin read the state first,
// and refuses with validate's message a session chat could not resume.
func importRaw(ctx context.Context, e *env, cmd string, store *storeFlag, pos []string, force *bool, ps *pluginSettings) error {
	if store.set() {
		if len(pos) > 0 {
			return usagef(cmd, "unexpected argument %q: with --store the session keeps its own id: use 'wasmhist session import --store %s < SESSION.json'", pos[0], store.raw)
		}
		return importIntoStore(ctx, e, cmd, store, *force, ps)
	}
	a, err := sessionArgument(cmd, store, pos)
	if err != nil {
		return err
	}
	f, err := a.file()
	if err != nil {
		return err
	}
	path := a.name
	s, err := readImport(e, cmd, path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return failf(cmd, "%s is a directory: name the session file to write", path)
	case err == nil && !*force:
		return failf(cmd, "%s exists: pass --force to replace it with this session (revision %d; the stored one must be older), or import into a new file", path, s.Revision)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return failf(cmd, "session file %s: %w: check the path and its permissions", path, err)
	}
	if _, err := checkSlots(ctx, e, cmd, f, s, "standard input", "", "", ps); err != nil {
		return err
	}
	st, err := f.store(cmd)
	if err != nil {
		return err
	}
	if err := st.Save(ctx, s); err != nil {
		if errors.Is(err, session.ErrStaleRevision) {
			old, _, _ := readSessionFile(cmd, path)
			stored := "its"
			if old != nil {
				stored = fmt.Sprintf("its revision %d", old.Revision)
			}
			return failf(cmd, "%s holds a session at least as new as the imported revision %d (%s): keep it, or remove it first ('wasmhist session delete %s' also clears what its plugins stored, which a copy may share) and import again", path, s.Revision, stored, path)
		}
		return failf(cmd, "writing %s: %w: check that its directory is writable", path, err)
	}
	fmt.Fprintf(e.stdout, "imported session %s (revision %d, state slots: %s) into %s\n", s.SessionID, s.Revision, describeSlots(s), path)
	return nil
}

// readImport reads and checks the session on standard input.
func readImport(e *env, cmd, dest string) (*session.Session, error) {
	b, err := io.ReadAll(io.LimitReader(e.stdin, maxSessionBytes+1))
	switch {
	case err != nil:
		return nil, failf(cmd, "reading standard input: %w", err)
	case len(b) > maxSessionBytes:
		return nil, failf(cmd, "standard input is larger than %s, more than any session: pipe the output of 'wasmhist session export'", byteSize(maxSessionBytes))
	case len(bytes.TrimSpace(b)) == 0:
		return nil, usagef(cmd, "nothing on standard input: use 'wasmhist session export OLD.json | wasmhist session import %s'", dest)
	}
	s, err := decodeSession(b)
	if err != nil {
		return nil, failf(cmd, "standard input is not a valid session: %w: fix it at the place named", err)
	}
	return s, nil
}

// importIntoStore saves the session on standard input into a --store.
func importIntoStore(ctx context.Context, e *env, cmd string, store *storeFlag, force bool, ps *pluginSettings) error {
	s, err := readImport(e, cmd, "--store "+store.raw)
	if err != nil {
		return err
	}
	// The session's own id names it in the store.
	a := &sessionArg{cmd: cmd, store: store, name: s.SessionID}
	defer a.close()
	where := a.where("")
	replaced := ""
	if err := a.openStore(ctx, e); err != nil {
		return err
	}
	if f, err := a.file(); err != nil {
		return err
	} else if _, err := checkSlots(ctx, e, cmd, f, s, "standard input", "", "", ps); err != nil {
		return err
	}
	switch old, _, err := a.loadStored(ctx, e, s.SessionID); {
	case errors.Is(err, session.ErrNotFound):
	case force && a.corrupt(err):
		// Nothing can be read of it, so nothing is lost by replacing it.
		if err := a.removeCorrupt(ctx, e); err != nil {
			return err
		}
		replaced = fmt.Sprintf(", replacing the corrupt stored one (%s)", oneLine(err.Error()))
	case err != nil:
		return failf(cmd, "%w: %s", err, a.loadAdvice(err, "check the store"))
	case !force:
		return failf(cmd, "%s exists (revision %d): pass --force to replace it with this session (revision %d; the stored one must be older)", where, old.Revision, s.Revision)
	}
	if err := a.st.Save(ctx, s); err != nil {
		if errors.Is(err, session.ErrStaleRevision) {
			return failf(cmd, "%s is at least as new as the imported revision %d: keep it, or delete it first ('wasmhist session delete --store %s %s') and import again", where, s.Revision, store.raw, s.SessionID)
		}
		return failf(cmd, "writing %s: %w: check the store", where, err)
	}
	fmt.Fprintf(e.stdout, "imported session %s (revision %d, state slots: %s) into %s%s\n", s.SessionID, s.Revision, describeSlots(s), store.describe(), replaced)
	return nil
}
