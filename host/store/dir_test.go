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

func TestDirRoundTrip(t *testing.T) {
	ctx := context.Background()
	fs, err := NewDir(t.TempDir())
	require.NoError(t, err)
	_, err = fs.Load(ctx, "nope")
	require.ErrorIs(t, err, session.ErrNotFound)
	s := session.New()
	s.Revision = 1
	s.ServiceSessionID = "conv-1"
	s.State = map[string]session.ProviderState{"p": {Provider: "memory", StateVersion: 1, Data: json.RawMessage(`{"messages":[]}`)}}
	require.NoError(t, fs.Save(ctx, s))
	got, err := fs.Load(ctx, s.SessionID)
	require.NoError(t, err)
	require.Equal(t, mustJSON(t, s), mustJSON(t, got), "round trip")
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Dir(filepath.Join(fs.dir, "x")))
	require.Len(t, entries, 1, "no temporary files are left behind")
}

func TestDirRefusesInvalidIDs(t *testing.T) {
	fs, err := NewDir(t.TempDir())
	require.NoError(t, err)
	for _, id := range []string{"", ".", "..", "../x", `a\b`, "a/b"} {
		assert.Error(t, fs.Save(context.Background(), &session.Session{SessionID: id, Revision: 1}), "saved session id %q", id)
	}
}

// Concurrent writers of one revision: exactly one wins.
func TestDirHammer(t *testing.T) {
	ctx := context.Background()
	fs, err := NewDir(t.TempDir())
	require.NoError(t, err)
	const writers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, stale := 0, 0
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fs.Save(ctx, &session.Session{SessionID: "s", Revision: 1})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, session.ErrStaleRevision):
				stale++
			default:
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, wins, "wins")
	assert.Equal(t, writers-1, stale, "stale")
}

func mustJSON(t *testing.T, s *session.Session) string {
	t.Helper()
	b, err := session.Encode(s)
	require.NoError(t, err)
	return string(b)
}
