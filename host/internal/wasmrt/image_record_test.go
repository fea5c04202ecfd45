//go:build linux

package wasmrt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// imageRecordCache is a cache whose image of imageModule is recorded.
func imageRecordCache(t *testing.T) (c *Cache, want []byte, path, record string) {
	t.Helper()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	_, want, path = compileImage(t, c, nil) // writes the image
	passTick(t, path)
	comp, _, _ := compileImage(t, c, nil) // compares it, and records it
	id, ok := moduleID(comp.module)
	require.True(t, ok)
	record = c.imageRecordPath(id)
	require.FileExists(t, record)
	return c, want, path, record
}

// memoryOf is the start of a new instance's memory.
func memoryOf(t *testing.T, c *Cache, n int) []byte {
	t.Helper()
	ctx := context.Background()
	comp, _, _ := compileImage(t, c, nil)
	require.NotNil(t, comp.image)
	in, err := comp.newInstance(ctx, 4)
	require.NoError(t, err)
	defer in.mod.Close(ctx)
	got, ok := in.mod.Memory().Read(0, uint32(n))
	require.True(t, ok)
	return bytes.Clone(got)
}

// forgeImage records the file at path, as it now is, as the image.
func forgeImage(t *testing.T, record, path string) {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	require.NoError(t, writeAtomic(record, fmt.Appendf(nil, imageRecordFormat, filepath.Base(path), st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano())))
}

// TestMemoryImageRecordTrusted: a load maps the image file the record
// names, unchanged, without comparing it (here a forged record naming
// other bytes, to show it is trusted).
func TestMemoryImageRecordTrusted(t *testing.T) {
	c, want, path, record := imageRecordCache(t)
	other := bytes.Clone(want)
	other[1500] ^= 0xff
	otherPath := filepath.Join(filepath.Dir(path), "other.bin")
	require.NoError(t, writePaged(otherPath, other))
	forgeImage(t, record, otherPath)
	require.Equal(t, other, memoryOf(t, c, len(want)))
}

// TestMemoryImageRecordRefused: an image file changed behind the record's
// back, or a record or file another user may write, is compared again;
// every instance starts from the module's data.
func TestMemoryImageRecordRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path, record string)
	}{{
		// The same size and modification time: only the change time says
		// it changed.
		name: "changed in place",
		change: func(t *testing.T, path, _ string) {
			info, err := os.Stat(path)
			require.NoError(t, err)
			changeByte(t, path)
			require.NoError(t, os.Chtimes(path, info.ModTime(), info.ModTime()))
		},
	}, {
		name: "record writable by others",
		change: func(t *testing.T, path, record string) {
			changeByte(t, path)
			forgeImage(t, record, path)
			require.NoError(t, os.Chmod(record, 0o666))
		},
	}, {
		name: "image writable by others",
		change: func(t *testing.T, path, record string) {
			changeByte(t, path)
			require.NoError(t, os.Chmod(path, 0o666))
			forgeImage(t, record, path)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, want, path, record := imageRecordCache(t)
			tc.change(t, path, record)
			require.Equal(t, want, memoryOf(t, c, len(want)))
		})
	}
}

// TestMemoryImageRecordRacy: an image file changed in the clock tick its
// comparison started in is not recorded.
func TestMemoryImageRecordRacy(t *testing.T) {
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(context.Background())
	_, _, path := compileImage(t, c, nil)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	clock := fsClock
	defer func() { fsClock = clock }()
	fsClock = func() int64 { return st.Ctim.Nano() }
	comp, _, _ := compileImage(t, c, nil)
	id, ok := moduleID(comp.module)
	require.True(t, ok)
	require.NoFileExists(t, c.imageRecordPath(id))
}

// changeByte changes one byte of the file at path in place, keeping its
// size.
func changeByte(t *testing.T, path string) { overwrite(t, path, 1500, []byte{0xff}) }

// overwrite writes b at offset at of the file at path, in place, as damage
// does: every link to the file sees the change.
func overwrite(t *testing.T, path string, at int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
