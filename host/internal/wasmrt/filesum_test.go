//go:build linux

package wasmrt

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// sumCache is a cache and a plugin file it read once, with the file's sum
// recorded.
type sumCache struct {
	c    *Cache
	path string
}

func newSumCache(t *testing.T) *sumCache {
	t.Helper()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	path := filepath.Join(t.TempDir(), "plugin.wasm")
	require.NoError(t, os.WriteFile(path, []byte("the plugin's bytes, version 1"), 0o644))
	passTick(t, path)
	sc := &sumCache{c: c, path: path}
	sc.read(t)
	require.FileExists(t, c.sumPath(path))
	return sc
}

// read reads the file through the cache, and checks the bytes it returns.
func (sc *sumCache) read(t *testing.T) [32]byte {
	t.Helper()
	b, sum, err := sc.c.ReadFile(sc.path)
	require.NoError(t, err)
	want, err := os.ReadFile(sc.path)
	require.NoError(t, err)
	require.Equal(t, want, b)
	return sum
}

// forge makes the record of the file say that it is as it now is, with a
// sum of other bytes.
func (sc *sumCache) forge(t *testing.T) [32]byte {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(sc.path, &st))
	id := identity{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	forged := sha256.Sum256([]byte("other bytes"))
	require.NoError(t, writeAtomic(sc.c.sumPath(sc.path), []byte(fmtSum(id, forged))))
	return forged
}

// TestFileSumTrusted: the sum of a file that did not change since it was
// recorded is the record's (here a forged one, to show it is trusted).
func TestFileSumTrusted(t *testing.T) {
	sc := newSumCache(t)
	forged := sc.forge(t)
	sum, ok := sc.c.StatSum(sc.path)
	require.True(t, ok, "StatSum trusts the record as ReadFile does")
	require.Equal(t, forged, sum)
	require.Equal(t, forged, sc.read(t))
}

// TestFileSumRefused: a file changed behind the record's back, or a
// record or file another user may write, gets the sum of its bytes.
func TestFileSumRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, sc *sumCache)
	}{{
		// The same size and modification time: only the change time
		// (and the bytes) say it changed.
		name: "changed in place",
		change: func(t *testing.T, sc *sumCache) {
			info, err := os.Stat(sc.path)
			require.NoError(t, err)
			f, err := os.OpenFile(sc.path, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("2"), info.Size()-1)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, os.Chtimes(sc.path, info.ModTime(), info.ModTime()))
		},
	}, {
		name: "replaced",
		change: func(t *testing.T, sc *sumCache) {
			info, err := os.Stat(sc.path)
			require.NoError(t, err)
			other := sc.path + ".new"
			require.NoError(t, os.WriteFile(other, []byte("the plugin's bytes, version 2"), 0o644))
			require.NoError(t, os.Chtimes(other, info.ModTime(), info.ModTime()))
			require.NoError(t, os.Rename(other, sc.path))
		},
	}, {
		name: "record writable by others",
		change: func(t *testing.T, sc *sumCache) {
			sc.forge(t)
			require.NoError(t, os.Chmod(sc.c.sumPath(sc.path), 0o666))
		},
	}, {
		// Another user could change its bytes through a shared mapping
		// without changing its times.
		name: "file writable by others",
		change: func(t *testing.T, sc *sumCache) {
			require.NoError(t, os.Chmod(sc.path, 0o666))
			sc.forge(t)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newSumCache(t)
			tc.change(t, sc)
			_, ok := sc.c.StatSum(sc.path)
			require.False(t, ok, "StatSum gives no sum without the bytes")
			b, err := os.ReadFile(sc.path)
			require.NoError(t, err)
			require.Equal(t, sha256.Sum256(b), sc.read(t))
		})
	}
}

// TestFileSumRacy: a file changed in the clock tick its read started in is
// not recorded (a change after the read in that same tick would keep its
// stat identity).
func TestFileSumRacy(t *testing.T) {
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(context.Background())
	path := filepath.Join(t.TempDir(), "plugin.wasm")
	require.NoError(t, os.WriteFile(path, []byte("bytes"), 0o644))
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	clock := fsClock
	defer func() { fsClock = clock }()
	fsClock = func() int64 { return st.Ctim.Nano() }
	_, _, err = c.ReadFile(path)
	require.NoError(t, err)
	require.NoFileExists(t, c.sumPath(path))
}
