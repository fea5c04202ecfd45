package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/wasmhist/wasmhist/host/session"
)

// Errors of session stores, for errors.Is.
var (
	// ErrStaleRevision reports a save of a session whose stored copy has
	// the same or a newer revision: someone else committed since this copy
	// was loaded, and writing it would lose their update.
	ErrStaleRevision = errors.New("agent: session store: stale revision")
	// ErrSessionNotFound reports a load of a session the store does not hold.
	ErrSessionNotFound = errors.New("agent: session store: session not found")
)

// SessionSaver persists committed sessions. Config.Saver takes one.
type SessionSaver interface {
	// Save stores s. It must refuse, with an error wrapping
	// ErrStaleRevision, a session whose stored copy's Revision is not
	// lower than s.Revision.
	Save(ctx context.Context, s *session.Session) error
}

// SessionStore loads and saves whole sessions.
type SessionStore interface {
	SessionSaver
	// Load returns the stored session, or an error wrapping
	// ErrSessionNotFound.
	Load(ctx context.Context, sessionID string) (*session.Session, error)
}

// FileStore keeps each session as one JSON file in a directory. Writes are
// atomic (a temporary file is written, synced and renamed over the old one,
// then the directory is synced), so a crash leaves the old or the new
// session, never a torn one. Save refuses stale revisions: of two writers
// that loaded the same revision, the second to save gets ErrStaleRevision.
//
// The revision check and the rename are serialized within the process; two
// processes writing one directory are not (use a store backed by a
// database for that).
type FileStore struct {
	dir string
	mu  sync.Mutex
}

var _ SessionStore = (*FileStore)(nil)

// NewFileStore returns a store writing into dir, creating it if needed.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: file store: %w", err)
	}
	return &FileStore{dir: dir}, nil
}

func (f *FileStore) path(id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) || strings.ContainsRune(id, 0) {
		return "", fmt.Errorf("agent: file store: invalid session id %q", id)
	}
	return filepath.Join(f.dir, id+".json"), nil
}

// Load implements SessionStore.
func (f *FileStore) Load(_ context.Context, id string) (*session.Session, error) {
	p, err := f.path(id)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent: file store: load %q: %w", id, ErrSessionNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("agent: file store: load %q: %w", id, err)
	}
	var s session.Session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("agent: file store: load %q: %w", id, err)
	}
	return &s, nil
}

// Save implements SessionSaver.
func (f *FileStore) Save(ctx context.Context, s *session.Session) error {
	p, err := f.path(s.SessionID)
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("agent: file store: save %q: %w", s.SessionID, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	old, err := f.Load(ctx, s.SessionID)
	switch {
	case errors.Is(err, ErrSessionNotFound):
	case err != nil:
		return err
	case old.Revision >= s.Revision:
		return fmt.Errorf("agent: file store: save %q at revision %d: stored revision is %d: %w",
			s.SessionID, s.Revision, old.Revision, ErrStaleRevision)
	}
	if err := writeFileAtomic(p, data); err != nil {
		return fmt.Errorf("agent: file store: save %q: %w", s.SessionID, err)
	}
	return nil
}

// writeFileAtomic replaces path with data so that a crash leaves either the
// old file or the new one.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// The rename is durable only once the directory entry is.
	return d.Sync()
}
