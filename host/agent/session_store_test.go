package agent

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

	"github.com/wasmhist/wasmhist/abi"
)

func TestFileStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir())
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

func TestFileStoreRefusesInvalidIDs(t *testing.T) {
	fs, err := NewFileStore(t.TempDir())
	require.NoError(t, err)
	for _, id := range []string{"", ".", "..", "../x", `a\b`, "a/b"} {
		assert.Error(t, fs.Save(context.Background(), &session.Session{SessionID: id, Revision: 1}), "saved session id %q", id)
	}
}

// Two writers load the same revision; the second to save is refused, so
// the first writer's update is not lost.
func TestFileStoreTwoWriters(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir())
	require.NoError(t, err)
	p := NewMemoryProvider("p")
	a, err := New(Config{
		Model:     (&fakeService{reply: func(int, []abi.Message) abi.Message { return abi.NewMessage(abi.RoleAssistant, "a") }}).client(),
		Providers: []ProviderConfig{{Provider: p}},
		Saver:     fs,
	})
	require.NoError(t, err)
	base := session.New()
	_, err = a.Run(ctx, base, []abi.Message{abi.NewMessage(abi.RoleUser, "first")}, nil)
	require.NoError(t, err)
	w1, _ := fs.Load(ctx, base.SessionID)
	w2, _ := fs.Load(ctx, base.SessionID)
	_, err = a.Run(ctx, w1, []abi.Message{abi.NewMessage(abi.RoleUser, "from w1")}, nil)
	require.NoError(t, err)
	before := mustJSON(t, w2)
	_, err = a.Run(ctx, w2, []abi.Message{abi.NewMessage(abi.RoleUser, "from w2")}, nil)
	require.ErrorIs(t, err, session.ErrStaleRevision)
	require.Equal(t, before, mustJSON(t, w2), "the refused writer's session changed")
	onDisk, _ := fs.Load(ctx, base.SessionID)
	require.Equal(t, "user:first asst:a user:from w1 asst:a", stored(t, p, onDisk))
	require.Equal(t, int64(2), onDisk.Revision)
}

// Concurrent writers of one revision: exactly one wins.
func TestFileStoreHammer(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir())
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
