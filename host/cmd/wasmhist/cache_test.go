package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
)

// TestCacheShowAndClear: a load fills the cache the command reports, and
// clear empties it.
func TestCacheShowAndClear(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	inv := invocation{env: []string{cacheDirEnv + "=" + dir}}
	inv.ok(t, "chat", "-m", "hi")
	var r cacheReport
	require.NoError(t, json.Unmarshal([]byte(inv.ok(t, "cache", "--json")), &r))
	assert.Equal(t, dir, r.Dir)
	assert.Equal(t, host.CacheSubdir(), r.Current)
	assert.Positive(t, r.Files)
	assert.Greater(t, r.Bytes, int64(1<<20), "a compiled plugin is megabytes")
	assert.Equal(t, []string{host.CacheSubdir()}, r.Versions)
	out := inv.ok(t, "cache")
	assert.Contains(t, out, "this build's")

	assert.Contains(t, inv.ok(t, "cache", "clear"), "cleared "+dir)
	_, err := os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the cache is gone")
	invocation{}.failsWithOneLine(t, exitUsage, []string{"cache", "burn"}, `unknown action "burn"`)
}

// TestCacheIsBounded: past the bound, another runtime version's code goes
// first and this build's stays.
func TestCacheIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	stale := filepath.Join(dir, "wazero-v0.0.1_extism-v0.0.1_linux-amd64")
	require.NoError(t, os.MkdirAll(stale, 0o755))
	for _, name := range []string{"a", "b"} {
		f, err := os.Create(filepath.Join(stale, name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(maxCacheBytes/2+1)) // sparse: no disk is used
		require.NoError(t, f.Close())
	}
	inv := invocation{env: []string{cacheDirEnv + "=" + dir}}
	inv.ok(t, "chat", "-m", "hi") // prunes, then compiles into this build's subdirectory
	inv.ok(t, "chat", "-m", "hi") // prunes again, now over the bound
	files, err := cacheFiles(dir)
	require.NoError(t, err)
	var total int64
	current := 0
	for _, f := range files {
		total += f.size
		if isUnder(f.path, filepath.Join(dir, host.CacheSubdir())) {
			current++
		}
	}
	assert.LessOrEqual(t, total, int64(maxCacheBytes))
	assert.Positive(t, current, "this build's code is kept")
}

// TestCacheCountsLinkedFilesOnce: the compiled code linked under a
// plugin's skeleton entry as well counts once against the bound.
func TestCacheCountsLinkedFilesOnce(t *testing.T) {
	dir := t.TempDir()
	code := filepath.Join(dir, "code")
	require.NoError(t, os.WriteFile(code, make([]byte, 1000), 0o600))
	require.NoError(t, os.Link(code, filepath.Join(dir, "skeleton-entry")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "other"), make([]byte, 1000), 0o600))
	files, err := cacheFiles(dir)
	require.NoError(t, err)
	require.Len(t, files, 3, "every name is listed, so that pruning removes each")
	var total int64
	for _, f := range files {
		total += f.size
	}
	assert.Equal(t, int64(2000), total)
}

// TestCompileNoteOnTerminal: the first use of a plugin, compiled while
// its first calls run, is announced on a terminal; a warm load is silent.
func TestCompileNoteOnTerminal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	run := func() string {
		master, tty := openPTY(t)
		scr := newScreen(master)
		cmd := startInTerminal(t, tty, []string{cacheDirEnv + "=" + dir}, "chat", "-m", "hi")
		require.Equal(t, 0, exitCode(t, cmd), "screen:\n%s", scr)
		scr.waitFor(t, "assistant: ", 1)
		return scr.String()
	}
	assert.Contains(t, run(), "first use of inmemory.wasm: compiling it for this machine")
	assert.NotContains(t, run(), "compiling", "a warm load says nothing")
}

// TestCompileNoteTrustsFileIdentity: once a plugin file loaded, a later
// run on a terminal knows it by its path and stat identity, without
// reading and hashing it again (the marker by sum is not even consulted);
// the file written anew is a first use again.
func TestCompileNoteTrustsFileIdentity(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	require.NoError(t, os.MkdirAll(filepath.Join(cache, host.CacheSubdir()), 0o700))
	plugin := filepath.Join(dir, "p.wasm")
	require.NoError(t, os.WriteFile(plugin, []byte("the first build"), 0o600))
	master, tty := openPTY(t)
	scr := newScreen(master)
	e := &env{stderr: tty, getenv: func(k string) string {
		if k == cacheDirEnv {
			return cache
		}
		return ""
	}}
	runs := 0
	note := func() bool {
		t.Helper()
		before := len(scr.String())
		compileNote(e, "chat", plugin)(true)
		runs++
		end := fmt.Sprintf("end of run %d", runs)
		fmt.Fprintln(tty, end)
		scr.waitFor(t, end, 1)
		return strings.Contains(scr.String()[before:], "first use of p.wasm")
	}
	sums := func() []string {
		m, err := filepath.Glob(filepath.Join(cache, host.CacheSubdir(), "*.loaded"))
		require.NoError(t, err)
		return m
	}

	require.True(t, note(), "the first use is announced")
	require.Len(t, sums(), 1)
	require.False(t, note(), "a warm load says nothing")

	for _, m := range sums() {
		require.NoError(t, os.Remove(m))
	}
	assert.False(t, note(), "the file's identity alone says it loaded before")

	require.NoError(t, os.WriteFile(plugin, []byte("the second build"), 0o600))
	assert.True(t, note(), "a file written anew is a first use")
	assert.False(t, note())
}

// TestUnusableCacheDir: without a usable default cache location (a HOME
// that is not a directory, as a service user's may be) plugins still run,
// compiled for this run only, with one note that says how to keep them; a
// $WASMHIST_CACHE_DIR the user set that cannot be used is an error that
// names it.
func TestUnusableCacheDir(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o600))

	tmp := t.TempDir()
	res := invocation{env: []string{"HOME=" + notADir, "XDG_CACHE_HOME=", cacheDirEnv + "=", "TMPDIR=" + tmp}}.wasmhist(t, "chat", "-m", "hi")
	require.Equal(t, 0, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stdout, "assistant: ")
	line, rest, _ := strings.Cut(res.stderr, "\n")
	assert.Empty(t, rest, "more than one line on stderr: %s", res.stderr)
	assert.Contains(t, line, "note: no compile cache")
	assert.Contains(t, line, cacheDirEnv)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "the run's temporary cache is removed")

	invocation{env: []string{cacheDirEnv + "=" + notADir}}.failsWithOneLine(t, exitFail, []string{"chat", "-m", "hi"},
		"compile cache "+notADir, "$"+cacheDirEnv, "directory you can write")
}
