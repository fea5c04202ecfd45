package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
)

// Saver persists committed sessions. Config.Saver takes one.
type Saver interface {
	// Save stores s. It must refuse, with an error wrapping
	// session.ErrStaleRevision, a session whose stored copy's Revision is not
	// lower than s.Revision.
	Save(ctx context.Context, s *session.Session) error
}

// Store loads and saves whole sessions.
type Store interface {
	Saver
	// Load returns the stored session, or an error wrapping
	// session.ErrNotFound.
	Load(ctx context.Context, sessionID string) (*session.Session, error)
}

// Manager is a Store that can also list and delete the
// sessions it holds. It is optional, as database/sql/driver's optional
// interfaces are: a Store written before it keeps compiling, and a
// caller that needs it asserts it (store.(Manager)).
type Manager interface {
	Store
	Deleter
	// List returns every stored session, ordered by id.
	List(ctx context.Context) ([]Info, error)
}

// Deleter deletes sessions: every Manager, and a *File.
type Deleter interface {
	// Delete removes a session if its stored revision is revision, the
	// one the caller last saw; otherwise it removes nothing and returns an
	// error wrapping session.ErrStaleRevision, so a delete never loses a commit
	// the deleter has not seen. A missing session is an error wrapping
	// session.ErrNotFound.
	Delete(ctx context.Context, sessionID string, revision int64) error
}

// Info describes one stored session.
type Info struct {
	SessionID string
	Revision  int64
	// Updated is when the stored revision was saved, by the store's
	// clock (the database server's, where there is one).
	Updated time.Time
}

// Dir keeps each session as one JSON file in a directory, named
// after its session id; see File for how each file is written.
type Dir struct {
	dir string
}

var (
	_ Store      = (*Dir)(nil)
	_ txn.Stager = (*Dir)(nil)
)

// NewDir returns a store writing into dir, creating it if needed.
func NewDir(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: file store: %w", err)
	}
	return &Dir{dir: dir}, nil
}

func (f *Dir) file(id string) (*File, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) || strings.ContainsRune(id, 0) {
		return nil, fmt.Errorf("%w %q: a Dir cannot name a file after it", ErrInvalidID, id)
	}
	return NewFile(filepath.Join(f.dir, id+".json")), nil
}

// Load implements Store.
func (f *Dir) Load(ctx context.Context, id string) (*session.Session, error) {
	sf, err := f.file(id)
	if err != nil {
		return nil, err
	}
	return sf.Load(ctx)
}

// PrepareSave implements txn.Stager.
func (f *Dir) PrepareSave(ctx context.Context, tx *txn.Txn, s *session.Session) (txn.Prepared, error) {
	sf, err := f.file(s.SessionID)
	if err != nil {
		return nil, err
	}
	return sf.PrepareSave(ctx, tx, s)
}

// Save implements Saver.
func (f *Dir) Save(ctx context.Context, s *session.Session) error {
	sf, err := f.file(s.SessionID)
	if err != nil {
		return err
	}
	return sf.Save(ctx, s)
}

// File keeps one session in one JSON file at a path of the
// caller's choosing; the file's name need not be the session id.
//
// Writes are atomic (a temporary file is written, synced and renamed over
// the old one, then the directory is synced), so a crash leaves the old or
// the new session, never a torn one. Save refuses stale revisions: of two
// writers that loaded the same revision, the second to save gets
// session.ErrStaleRevision, whether they are in one process or in several on one
// machine (the check and the rename run under an exclusive lock on the
// directory). A file without write permission is the owner's "do not
// change this": Save refuses it rather than replacing it, and a replaced
// file keeps its mode.
//
// The JSON is written compact: a plugin's state is raw JSON whose bytes
// (tool results among them) are replayed to models as they were stored,
// and indenting the file would re-indent them.
type File struct {
	path string
	mu   sync.Mutex
}

var (
	_ txn.Stager = (*File)(nil)
	_ Deleter    = (*File)(nil)
)

// NewFile returns the session file at path. Nothing is read or
// created until Load or Save.
func NewFile(path string) *File { return &File{path: path} }

// Path is where the session is kept.
func (f *File) Path() string { return f.path }

// Load reads the session, or returns an error wrapping session.ErrNotFound
// when the file does not exist.
func (f *File) Load(_ context.Context) (*session.Session, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent: session file %s: %w", f.path, session.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: session file %s: %w", f.path, err)
	}
	var s session.Session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("agent: session file %s: %w", f.path, err)
	}
	return &s, nil
}

// Delete implements Deleter: it removes the file if it holds session id
// at revision. The check and the removal run under the directory lock
// every save takes, so a save cannot slip in between them; a file holding
// another session is an error wrapping session.ErrNotFound.
func (f *File) Delete(ctx context.Context, id string, revision int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	unlock, err := lockDir(filepath.Dir(f.path))
	if err != nil {
		return fmt.Errorf("agent: session file %s: delete: %w", f.path, err)
	}
	defer unlock()
	old, err := f.Load(ctx)
	switch {
	case err != nil:
		return err
	case old.SessionID != id:
		return fmt.Errorf("agent: session file %s: delete %q: it holds session %q: %w", f.path, id, old.SessionID, session.ErrNotFound)
	case old.Revision != revision:
		return fmt.Errorf("agent: session file %s: delete %q at revision %d: stored revision is %d: %w",
			f.path, id, revision, old.Revision, session.ErrStaleRevision)
	}
	if err := os.Remove(f.path); err != nil {
		return fmt.Errorf("agent: session file %s: delete: %w", f.path, err)
	}
	// The removal is durable only once the directory entry is.
	if err := syncDir(filepath.Dir(f.path)); err != nil {
		return fmt.Errorf("agent: session file %s: delete: %w", f.path, err)
	}
	return nil
}

// Save implements Saver.
func (f *File) Save(ctx context.Context, s *session.Session) error {
	p, err := f.prepare(ctx, s)
	if err != nil {
		return err
	}
	return p.Commit(ctx)
}

// PrepareSave implements txn.Stager: it takes the directory's lock, checks
// the revision and writes the new file beside the old one, synced; Commit
// renames it over the old one. Between the two no other writer can save.
func (f *File) PrepareSave(ctx context.Context, _ *txn.Txn, s *session.Session) (txn.Prepared, error) {
	return f.prepare(ctx, s)
}

func (f *File) prepare(ctx context.Context, s *session.Session) (_ *preparedFile, err error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("agent: session file %s: save: %w", f.path, err)
	}
	f.mu.Lock()
	unlock, err := lockDir(filepath.Dir(f.path))
	if err != nil {
		f.mu.Unlock()
		return nil, fmt.Errorf("agent: session file %s: save: %w", f.path, err)
	}
	defer func() {
		if err != nil {
			unlock()
			f.mu.Unlock()
		}
	}()
	mode := os.FileMode(0o600)
	switch fi, err := os.Stat(f.path); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("agent: session file %s: save: %w", f.path, err)
	case fi.Mode().Perm()&0o200 == 0:
		return nil, fmt.Errorf("agent: session file %s: save: the file is read-only (mode %04o): %w", f.path, fi.Mode().Perm(), os.ErrPermission)
	default:
		mode = fi.Mode().Perm()
	}
	old, err := f.Load(ctx)
	switch {
	case errors.Is(err, session.ErrNotFound):
	case err != nil:
		return nil, err
	case old.Revision >= s.Revision:
		return nil, fmt.Errorf("agent: session file %s: save %q at revision %d: stored revision is %d: %w",
			f.path, s.SessionID, s.Revision, old.Revision, session.ErrStaleRevision)
	}
	tmp, err := writeTemp(f.path, data, mode)
	if err != nil {
		return nil, fmt.Errorf("agent: session file %s: save: %w", f.path, err)
	}
	return &preparedFile{f: f, tmp: tmp, unlock: unlock}, nil
}

// preparedFile is a staged save: the new file written beside the old one,
// the directory locked.
type preparedFile struct {
	f      *File
	tmp    string
	unlock func()
	done   bool
}

func (p *preparedFile) Target() string { return "" }

func (p *preparedFile) Commit(context.Context) error {
	if p.done {
		return nil
	}
	defer p.end()
	if err := renameDurably(p.tmp, p.f.path); err != nil {
		os.Remove(p.tmp)
		return fmt.Errorf("agent: session file %s: save: %w", p.f.path, err)
	}
	return nil
}

func (p *preparedFile) Abort() {
	if p.done {
		return
	}
	os.Remove(p.tmp)
	p.end()
}

func (p *preparedFile) end() {
	p.done = true
	p.unlock()
	p.f.mu.Unlock()
}

// writeTemp writes data, synced, to a new file beside path and returns its
// name.
func writeTemp(path string, data []byte, mode os.FileMode) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// renameDurably renames tmp to path and syncs the directory: the rename is
// durable only once the directory entry is.
func renameDurably(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir syncs the directory dir, making its entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
