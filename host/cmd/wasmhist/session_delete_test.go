package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// fileRevision is the revision the session file at path holds.
func fileRevision(t *testing.T, path string) int64 {
	t.Helper()
	s, err := store.NewFile(path).Load(context.Background())
	require.NoError(t, err)
	return s.Revision
}

// TestSessionDeleteRefusesAChatCommittedSinceTheLoad: session delete has
// read the session at revision 1 and loaded its plugin when a chat
// commits revision 2; the erase is then refused, in one line with what to
// do, and the session file and its rows are as the chat left them, so the
// delete never erases a revision it did not read. Deleting again removes
// revision 2 and its rows.
func TestSessionDeleteRefusesAChatCommittedSinceTheLoad(t *testing.T) {
	t.Parallel()
	const cmd = "session delete"
	ctx := context.Background()
	dir := t.TempDir()
	r := invocation{dir: dir}
	path := filepath.Join(dir, "s.json")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", path, "-m", "I like tea")

	// The command's steps up to the erase, as runSessionDelete takes them.
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string {
		if k == pluginDirEnv {
			return pluginDir
		}
		return os.Getenv(k)
	}}
	fs := flagSet(e, cmd, helpText{usage: "FILE"})
	sf := addSlotFlags(fs)
	a, err := sessionArgument(cmd, sf.store, []string{path})
	require.NoError(t, err)
	defer a.close()
	s, _, f, err := a.read(ctx, e)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Revision)
	sp, err := loadSlotPlugins(ctx, e, cmd, f, s, "", "", sf.ps)
	require.NoError(t, err)
	defer sp.close(ctx)

	r.ok(t, "chat", "--session", path, "-m", "I like jam")

	_, _, err = eraseSession(ctx, cmd, path, sp, s, store.NewFile(path), false)
	require.ErrorIs(t, err, session.ErrStaleRevision)
	msg := err.Error()
	assert.NotContains(t, msg, "\n")
	assert.True(t, strings.HasPrefix(msg, "wasmhist session delete: "+path+" changed while it was being deleted (it was at revision 1)"), msg)
	assert.Contains(t, msg, "nothing was erased")
	assert.True(t, strings.HasSuffix(msg, "run the command again when no chat is using it"), msg)
	assert.Equal(t, int64(2), fileRevision(t, path))
	assert.Len(t, historyTexts(t, r, "--session", path), 4, "the history of revision 2")

	out := r.ok(t, "session", "delete", path)
	assert.Equal(t, "deleted "+path+" (session s, revision 2); cleared: history\n", out)
	_, messages := sqliteRows(t, filepath.Join(dir, "s.db"))
	assert.Zero(t, messages)
}

// TestSessionDeleteWhileTheFileIsBehind: the session file is one chat
// behind its database (restored alone from a copy, as a process ending
// between the database's commit and the file's save leaves it). Delete
// erases nothing of a revision it did not read: it brings the file up to
// date, as a chat would, and asks to be run again, which deletes that
// revision with its rows.
func TestSessionDeleteWhileTheFileIsBehind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := invocation{dir: dir}
	file := filepath.Join(dir, "s.json")
	r.ok(t, "chat", "--plugin", "sqlite", "--session", "s.json", "-m", "I like tea")
	behind, err := os.ReadFile(file)
	require.NoError(t, err)
	r.ok(t, "chat", "--session", "s.json", "-m", "I like jam")
	require.NoError(t, os.WriteFile(file, behind, 0o600))

	r.failsWithOneLine(t, exitFail, []string{"session", "delete", "s.json"},
		"s.json was at revision 1, its database at 2", "brought up to date and nothing was deleted", "run the command again to delete revision 2")
	assert.Equal(t, int64(2), fileRevision(t, file))
	assert.Len(t, historyTexts(t, r, "--session", "s.json"), 4, "the history of revision 2")

	out := r.ok(t, "session", "delete", "s.json")
	assert.Equal(t, "deleted s.json (session s, revision 2); cleared: history\n", out)
	assert.NoFileExists(t, file)
	_, messages := sqliteRows(t, filepath.Join(dir, "s.db"))
	assert.Zero(t, messages)
}
