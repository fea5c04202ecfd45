//go:build linux

package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/loader"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestWarmLoadReadsNoPluginBytes: a load of a plugin file records the
// loader's checks of its sections by its sum, and a later warm load takes
// them from that record without reading the file: a record forged to say
// the module has no ABI marker makes the load refuse it, although its
// bytes have one.
func TestWarmLoadReadsNoPluginBytes(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile(sdktest.BuildPlugin(t, "../plugins/inmemory"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "inmemory.wasm")
	require.NoError(t, os.WriteFile(path, wasm, 0o644))
	pastChange(t, path) // a read from now on records the file's sum
	sum := sha256.Sum256(wasm)
	dir := t.TempDir()
	load := func() (*Plugin, *Host, error) {
		h, err := New(ctx, Config{CacheDir: dir})
		require.NoError(t, err)
		t.Cleanup(func() { h.Close(ctx) })
		p, err := h.Load(ctx, File(path), LoadOptions{})
		return p, h, err
	}

	p, h, err := load()
	require.NoError(t, err)
	require.NoError(t, p.Compiled(ctx))
	want, err := loader.ReadSections(wasm)
	require.NoError(t, err)
	got, ok := h.cache.Sections(sum)
	require.True(t, ok, "the first load records the sections it checked")
	require.Equal(t, want, got)
	_, _, err = load()
	require.NoError(t, err, "a warm load")

	h.cache.KeepSections(sum, &loader.Sections{Exports: []string{"describe"}, Imports: want.Imports})
	_, _, err = load()
	require.ErrorIs(t, err, ErrMissingExport, "the warm load took the sections from the record, not from the bytes")
}

// TestReadSumRefusesChangedBytes: bytes read after the load checked the
// plugin's sum (a warm load that needs them after all) must have that sum.
func TestReadSumRefusesChangedBytes(t *testing.T) {
	ctx := context.Background()
	h, err := New(ctx, Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	path := filepath.Join(t.TempDir(), "plugin.wasm")
	require.NoError(t, os.WriteFile(path, []byte("\x00asm\x01\x00\x00\x00 version 2"), 0o644))
	checked := sha256.Sum256([]byte("\x00asm\x01\x00\x00\x00 version 1"))
	_, err = File(path).readSum(h.cache, checked)
	require.ErrorIs(t, err, ErrChecksumMismatch)
	require.True(t, errors.As(err, new(sourceError)), "the file's fault, not the plugin's")
	require.ErrorContains(t, err, "changed while it was loading")

	require.NoError(t, os.Remove(path))
	_, err = File(path).readSum(h.cache, checked)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.True(t, errors.As(err, new(sourceError)))
}

// pastChange waits until the file system's clock (the coarse real-time
// clock, which stamps files) is past the change time of the file at path.
func pastChange(t *testing.T, path string) {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	for {
		const clockRealtimeCoarse = 5
		var ts syscall.Timespec
		_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockRealtimeCoarse, uintptr(unsafe.Pointer(&ts)), 0)
		require.Zero(t, errno)
		if ts.Nano() > st.Ctim.Nano() {
			return
		}
		runtime.Gosched()
	}
}
