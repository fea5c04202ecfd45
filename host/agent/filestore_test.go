package agent

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// Two writers load the same revision; the second to save is refused, so
// the first writer's update is not lost.
func TestFileStoreTwoWriters(t *testing.T) {
	ctx := context.Background()
	fs, err := store.NewDir(t.TempDir())
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
