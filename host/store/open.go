package store

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/wasmhist/wasmhist/host/session"
)

// ErrInvalidID reports a session id a store cannot hold; CheckID says which
// ids every store accepts.
var ErrInvalidID = errors.New("store: invalid session id")

// MaxIDBytes bounds a session id LoadOrNew creates: a Dir names the file
// id+".json" and writes a temporary file beside it whose name is longer
// still, and most file systems cap a name at 255 bytes.
const MaxIDBytes = 128

// CheckID reports, with an error wrapping ErrInvalidID, whether id is one
// that every store of this package and its subpackages accepts, so that a
// conversation keeps its id when it moves from one store to another: 1 to
// MaxIDBytes bytes of UTF-8, no control character, no slash or backslash,
// neither "." nor "..". A user id, an e-mail address or a UUID qualifies.
//
// The stores themselves accept more, and load any id they hold: a Dir any
// non-empty file name without NUL that is not "." or ".." (its Load
// refuses others with ErrInvalidID), a File any id (the path is the
// caller's), sqlitestore and pgstore any non-empty id that survives
// encoding/json unchanged (valid UTF-8; for pgstore also without NUL,
// which PostgreSQL's text refuses). On a file system that ignores case
// (macOS, Windows) a Dir keeps "Ann" and "ann" in one file: keep ids in
// one case there.
func CheckID(id string) error {
	bad := ""
	switch {
	case id == "":
		bad = "empty"
	case len(id) > MaxIDBytes:
		bad = fmt.Sprintf("%d bytes, at most %d", len(id), MaxIDBytes)
	case id == "." || id == "..":
		bad = "a directory name"
	case !utf8.ValidString(id):
		bad = "not UTF-8"
	default:
		for _, r := range id {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				bad = fmt.Sprintf("control character %U", r)
				break
			}
			if r == '/' || r == '\\' {
				bad = fmt.Sprintf("%q, a path separator", r)
				break
			}
		}
	}
	if bad != "" {
		return fmt.Errorf("%w %q: %s; use 1 to %d bytes of UTF-8 without control characters, slashes or backslashes", ErrInvalidID, id, bad, MaxIDBytes)
	}
	return nil
}

// LoadOrNew returns the session st holds under id or, when it holds none,
// a new empty session with that id at revision 0; the run that first
// commits it saves revision 1. Of two processes that both create one
// session, the second to commit gets session.ErrStaleRevision (the stored
// revision is not lower than its own) and loads the first's, as after any
// stale write. A new session's id must pass CheckID; a stored session is
// returned whatever its id.
func LoadOrNew(ctx context.Context, st Store, id string) (*session.Session, error) {
	s, err := st.Load(ctx, id)
	if err == nil || !errors.Is(err, session.ErrNotFound) {
		return s, err
	}
	return newSession(id)
}

// LoadOrNew returns the session in the file or, when there is no file, a
// new empty session with id at revision 0 (see the package's LoadOrNew).
// A file holding another session is an error wrapping ErrInvalidID: the
// path is the caller's, and it named the wrong file.
func (f *File) LoadOrNew(ctx context.Context, id string) (*session.Session, error) {
	s, err := f.Load(ctx)
	switch {
	case errors.Is(err, session.ErrNotFound):
		return newSession(id)
	case err != nil:
		return nil, err
	case s.SessionID != id:
		return nil, fmt.Errorf("%w %q: session file %s holds session %q; open that session's file", ErrInvalidID, id, f.path, s.SessionID)
	}
	return s, nil
}

func newSession(id string) (*session.Session, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	s := session.New()
	s.SessionID = id
	return s, nil
}
