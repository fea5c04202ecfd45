package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
)

// TestSessionFileAnyName: the file's name need not be the session id, so
// a copied session file resumes.
func TestSessionFileAnyName(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := session.New()
	s.Revision = 1
	require.NoError(t, NewFile(filepath.Join(dir, "chat.json")).Save(ctx, s))
	b, err := os.ReadFile(filepath.Join(dir, "chat.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "try.json"), b, 0o600))
	cp := NewFile(filepath.Join(dir, "try.json"))
	got, err := cp.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, s.SessionID, got.SessionID)
	got.Revision++
	require.NoError(t, cp.Save(ctx, got))
}

// TestSessionFileKeepsStateBytes: a slot's JSON is stored and read back
// byte for byte, not re-indented.
func TestSessionFileKeepsStateBytes(t *testing.T) {
	ctx := context.Background()
	f := NewFile(filepath.Join(t.TempDir(), "s.json"))
	s := session.New()
	s.Revision = 1
	data := json.RawMessage(`{"messages":[{"role":"tool","contents":[{"type":"function_result","call_id":"c1","result":{"time":"12:00","zone":"UTC"}}]}]}`)
	s.SetState("history", session.ProviderState{Provider: "p", StateVersion: 1, Data: data})
	require.NoError(t, f.Save(ctx, s))
	got, err := f.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(got.State["history"].Data))
}

// TestSessionFileModes: a read-only file is refused, not replaced; a
// replaced file keeps its mode.
func TestSessionFileModes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := session.New()
	s.Revision = 1

	ro := filepath.Join(dir, "ro.json")
	require.NoError(t, NewFile(ro).Save(ctx, s))
	require.NoError(t, os.Chmod(ro, 0o444))
	next := *s
	next.Revision = 2
	err := NewFile(ro).Save(ctx, &next)
	require.ErrorIs(t, err, os.ErrPermission)
	assert.Contains(t, err.Error(), "read-only (mode 0444)")
	fi, err := os.Stat(ro)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o444), fi.Mode().Perm())

	shared := filepath.Join(dir, "shared.json")
	require.NoError(t, NewFile(shared).Save(ctx, s))
	require.NoError(t, os.Chmod(shared, 0o640))
	require.NoError(t, NewFile(shared).Save(ctx, &next))
	fi, err = os.Stat(shared)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
}

// TestSessionFileOneWriterWins: writers that loaded the same revision,
// each through its own File (its own lock on the directory, as
// separate processes have), race to save the next one: exactly one wins,
// the others get session.ErrStaleRevision.
func TestSessionFileOneWriterWins(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.json")
	base := session.New()
	base.Revision = 1
	require.NoError(t, NewFile(path).Save(ctx, base))
	for round := 2; round < 12; round++ {
		const writers = 8
		var wg sync.WaitGroup
		errs := make([]error, writers)
		start := make(chan struct{})
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				s := *base
				s.Revision = int64(round)
				errs[i] = NewFile(path).Save(ctx, &s)
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, session.ErrStaleRevision):
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		require.Equal(t, 1, won, "round %d: exactly one writer saves", round)
	}
}
