package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/store"
)

// TestCheckID: the ids every store accepts, and the others refused with
// ErrInvalidID and a message that says why.
func TestCheckID(t *testing.T) {
	cases := []struct {
		name, id, why string
	}{
		{name: "user id", id: "user-42"},
		{name: "e-mail", id: "ann@example.com"},
		{name: "unicode", id: "Zoë 名前"},
		{name: "longest", id: strings.Repeat("x", store.MaxIDBytes)},
		{name: "empty", id: "", why: "empty"},
		{name: "too long", id: strings.Repeat("x", store.MaxIDBytes+1), why: "129 bytes, at most 128"},
		{name: "dot", id: ".", why: "a directory name"},
		{name: "dot dot", id: "..", why: "a directory name"},
		{name: "slash", id: "a/b", why: "path separator"},
		{name: "backslash", id: `a\b`, why: "path separator"},
		{name: "NUL", id: "a\x00b", why: "control character U+0000"},
		{name: "newline", id: "a\nb", why: "control character U+000A"},
		{name: "C1 control", id: "a\u0085b", why: "control character U+0085"},
		{name: "not UTF-8", id: "a\xffb", why: "not UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := store.CheckID(c.id)
			if c.why == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalidID)
			assert.ErrorContains(t, err, c.why)
		})
	}
}

// TestLoadOrNewRefusesBadNewID: an id CheckID refuses is not created, in
// every store; a Dir refuses one it cannot name a file after even to load.
func TestLoadOrNewRefusesBadNewID(t *testing.T) {
	dir, err := store.NewDir(t.TempDir())
	require.NoError(t, err)
	for _, id := range []string{"", "a/b", "..", strings.Repeat("x", 200)} {
		s, err := store.LoadOrNew(context.Background(), dir, id)
		require.ErrorIs(t, err, store.ErrInvalidID, "id %q", id)
		assert.Nil(t, s)
		s, err = store.NewFile(filepath.Join(t.TempDir(), "s.json")).LoadOrNew(context.Background(), id)
		require.ErrorIs(t, err, store.ErrInvalidID, "id %q", id)
		assert.Nil(t, s)
	}
}

// TestFileLoadOrNew: a File creates the session when the file is absent,
// loads it when present, and refuses a file that holds another session.
func TestFileLoadOrNew(t *testing.T) {
	ctx := context.Background()
	f := store.NewFile(filepath.Join(t.TempDir(), "chat.json"))
	s, err := f.LoadOrNew(ctx, "ann")
	require.NoError(t, err)
	assert.Equal(t, "ann", s.SessionID)
	assert.EqualValues(t, 0, s.Revision)
	s.Revision = 1
	require.NoError(t, f.Save(ctx, s))

	again, err := f.LoadOrNew(ctx, "ann")
	require.NoError(t, err)
	assert.EqualValues(t, 1, again.Revision)

	_, err = f.LoadOrNew(ctx, "bob")
	require.ErrorIs(t, err, store.ErrInvalidID)
	assert.ErrorContains(t, err, `holds session "ann"`)
}

// LoadOrNew gives a service one call per request: the user's session if
// the store has it, else a new one under the user's id, saved by the first
// commit.
func ExampleLoadOrNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sessions, err := store.NewDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	s, err := store.LoadOrNew(ctx, sessions, "ann@example.com")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.SessionID, s.Revision)
	s.Revision++ // what an agent's commit does
	if err := sessions.Save(ctx, s); err != nil {
		log.Fatal(err)
	}
	s, err = store.LoadOrNew(ctx, sessions, "ann@example.com")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.SessionID, s.Revision)
	_, err = store.LoadOrNew(ctx, sessions, "../etc")
	fmt.Println(err)
	// Output:
	// ann@example.com 0
	// ann@example.com 1
	// store: invalid session id "../etc": a Dir cannot name a file after it
}
