//go:build linux

package host_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
)

// TestLoadPinnedFileChangedInPlace: the sum of a plugin file is kept in
// the cache while the file is unchanged; a file changed in place since,
// with the same size and modification time, is refused by its pin.
func TestLoadPinnedFileChangedInPlace(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile(hostilePath(t, "misbehave"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "misbehave.wasm")
	require.NoError(t, os.WriteFile(path, wasm, 0o644))
	sum := sha256.Sum256(wasm)
	pin := hex.EncodeToString(sum[:])
	host.PastChange(t, path) // a read from now on records the file's sum
	h := newHost(t, host.Config{CacheDir: t.TempDir()})
	_, err = h.Load(ctx, host.File(path), host.LoadOptions{SHA256: pin})
	require.NoError(t, err)

	info, err := os.Stat(path)
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{wasm[len(wasm)-1] ^ 1}, int64(len(wasm)-1))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(path, info.ModTime(), info.ModTime()))
	changed, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, info.Size(), changed.Size())
	require.Equal(t, info.ModTime(), changed.ModTime())

	_, err = h.Load(ctx, host.File(path), host.LoadOptions{SHA256: pin})
	require.ErrorIs(t, err, host.ErrChecksumMismatch)
}
