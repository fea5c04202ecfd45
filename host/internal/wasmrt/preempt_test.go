package wasmrt

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// spinExport is an export () -> i32 that loops for ever.
var spinExport = wasmtest.Func{Export: "spin", Results: []byte{wasmtest.I32}, Code: []byte{
	0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00, // loop br 0 end, i32.const 0
}}

func compileBytes(t *testing.T, wasm []byte) *Module {
	t.Helper()
	return compileOn(t, "compiler", wasm, testPages)
}

// TestPluginsAreRewritten: a plugin built by the Go toolchain is compiled
// rewritten, not with the runtime's slower preemption.
func TestPluginsAreRewritten(t *testing.T) {
	for _, pkg := range []string{"../../testdata/hostile/misbehave", "github.com/wasmhist/wasmhist/plugins/inmemory"} {
		m := compileBytes(t, buildWasm(t, pkg))
		assert.True(t, m.code().interruptible, "%s is compiled rewritten", pkg)
	}
}

// TestPreemption: a spinning guest is stopped by its call's deadline or
// cancellation, whether the module was rewritten or (having no memory)
// runs with the runtime's own preemption, on the compiler's code and on
// the interpreter's.
func TestPreemption(t *testing.T) {
	for _, kind := range engineKinds {
		modules := map[string]*Module{
			"rewritten":     compileOn(t, kind, wasmtest.Module{Funcs: []wasmtest.Func{spinExport}, Memory: true}.Bytes(), testPages),
			"not rewritten": compileOn(t, kind, wasmtest.Module{Funcs: []wasmtest.Func{spinExport}}.Bytes(), testPages),
		}
		require.True(t, modules["rewritten"].code().interruptible)
		require.False(t, modules["not rewritten"].code().interruptible)
		for name, m := range modules {
			testPreemption(t, kind+"/"+name, m)
		}
	}
}

func testPreemption(t *testing.T, name string, m *Module) {
	t.Run(name, func(t *testing.T) {
		ctx := context.Background()
		call := func(ctx context.Context) error {
			in, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			_, err = in.Call(ctx, "spin", nil)
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, call(dctx), hosterr.ErrTimeout, "deadline")

		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(200*time.Millisecond, cancel)
		require.ErrorIs(t, call(cctx), context.Canceled, "cancellation")

		require.ErrorIs(t, call(dctx), hosterr.ErrTimeout, "deadline passed before the call")
	})
}

// TestInterruptFlagIsClearedAfterACall: a context that ends after the
// guest's last check, as the call returns, leaves the instance usable, its
// flag clear.
func TestInterruptFlagIsClearedAfterACall(t *testing.T) {
	m := compileHostile(t, "misbehave")
	ctx := context.Background()
	in, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer in.Close(ctx)
	require.NotNil(t, in.interrupt)
	cctx, cancel := context.WithCancel(ctx)
	// Once cancel returns, the flag is being set.
	in.testReturned = cancel
	_, err = in.Call(cctx, "describe", nil)
	require.NoError(t, err, "the guest returned before the context ended")
	in.testReturned = nil
	assert.Zero(t, in.interrupt.Get(), "the flag after the call")
	_, err = in.Call(ctx, "describe", nil)
	require.NoError(t, err, "the next call")
}

// TestRewrittenModuleIsKept: the rewritten module is kept in the cache
// directory for the next load, with its CRC-32C; a file cut short or
// damaged, or one the runtime refuses, is replaced, and files of earlier
// versions of the rewrite are removed.
func TestRewrittenModuleIsKept(t *testing.T) {
	ctx := context.Background()
	wasm := hostileWasm(t, "misbehave")
	sum := sha256.Sum256(wasm)
	dir := t.TempDir()
	c, err := NewCache(dir)
	require.NoError(t, err)
	defer c.Close(ctx)
	load := func() *Module {
		e := newEngine(t, c)
		e.interpretFirst = false // the compiler's rewrite, at once
		m, err := e.Compile(ctx, sum, wasm, testPages)
		require.NoError(t, err)
		t.Cleanup(func() { m.Release(ctx) })
		return m
	}
	stem := filepath.Join(dir, "rewritten", hex.EncodeToString(sum[:]))
	earlier, later := stem+"-v0.wasm", stem+"-v"+strconv.Itoa(instrument.Version+1)+".wasm"
	stale, fresh := filepath.Join(dir, "rewritten", ".tmp-1"), filepath.Join(dir, "rewritten", ".tmp-2")
	require.NoError(t, os.MkdirAll(filepath.Dir(earlier), 0o700))
	for _, f := range []string{earlier, later, stale, fresh} {
		require.NoError(t, os.WriteFile(f, []byte("left by another host"), 0o600))
	}
	require.NoError(t, os.Chtimes(stale, time.Now().Add(-2*time.Hour), time.Now().Add(-2*time.Hour)))

	assert.True(t, load().code().interruptible)
	assert.NoFileExists(t, earlier, "an earlier version's file")
	assert.NoFileExists(t, stale, "a temporary file a crash left long ago")
	assert.FileExists(t, later, "a later version's file, of a newer host sharing the directory")
	assert.FileExists(t, fresh, "a temporary file another host may be writing")
	kept := []string{stem + "-v" + strconv.Itoa(instrument.Version) + ".wasm"}
	good, err := os.ReadFile(kept[0])
	require.NoError(t, err)
	rewrite, err := instrument.Module(wasm)
	require.NoError(t, err)
	crc := func(b []byte) []byte {
		return binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	assert.Equal(t, append(slices.Clone(rewrite), crc(rewrite)...), good, "the kept file is the rewrite and its CRC-32C")

	forged := append(slices.Clone(wasmbin.Header), 0x01, 0x01, 0x05) // five types, none there
	for _, tt := range []struct {
		name    string
		damaged []byte
	}{
		// Cut at a section boundary: a valid module, missing its data.
		{"cut short", rewrite[:len(rewrite)-1000]},
		{"one byte off", append(slices.Clone(good[:100]), append([]byte{good[100] ^ 1}, good[101:]...)...)},
		// Its checksum checks out, but the runtime refuses it.
		{"refused", append(forged, crc(forged)...)},
		{"cut short", rewrite[:len(rewrite)-1000]},
	} {
		name, damaged := tt.name, tt.damaged
		require.NoError(t, os.WriteFile(kept[0], damaged, 0o600), name)
		// Without its skeleton, the load reads the kept rewrite.
		require.NoError(t, os.Remove(c.skeletonPath(sum)))
		assert.True(t, load().code().interruptible, "the load after the file was %s", name)
		again, err := os.ReadFile(kept[0])
		require.NoError(t, err)
		assert.Equal(t, good, again, "the file %s is replaced", name)
	}
}
