//go:build unix

package main

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadOnlyDirectory: history reads a session in a directory its user
// cannot write, as the owner's colleague or a backup reader would. A
// session file needs nothing more; a plugin's SQLite database does
// (SQLite creates its write-ahead log's -shm file beside it even to
// read), and that is said with the way out, not as a failed PRAGMA.
// The command runs as an unprivileged user: root writes anywhere.
func TestReadOnlyDirectory(t *testing.T) {
	attr, home := unprivileged(t)
	// The directories up to the sessions must be reachable by that user.
	top, err := os.MkdirTemp("", "wasmhist-readonly-")
	require.NoError(t, err)
	t.Cleanup(func() { os.Chmod(filepath.Join(top, "ro"), 0o755); os.RemoveAll(top) })
	require.NoError(t, os.Chmod(top, 0o755))
	dir := filepath.Join(top, "ro")
	require.NoError(t, os.Mkdir(dir, 0o755))
	owner := invocation{dir: dir}
	owner.ok(t, "chat", "--plugin", "inmemory", "--session", "file.json", "-m", "I like Rome")
	owner.ok(t, "chat", "--plugin", "sqlite", "--session", "sql.json", "-m", "I like Rome")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NoError(t, os.Chmod(filepath.Join(dir, e.Name()), 0o644)) // readable by all
	}
	require.NoError(t, os.Chmod(dir, 0o555)) // writable by none but root

	reader := invocation{dir: dir, attr: attr, env: []string{"HOME=" + home, "WASMHIST_CACHE_DIR=" + filepath.Join(home, "cache")}}
	t.Run("session file", func(t *testing.T) {
		out := reader.ok(t, "history", "--session", "file.json")
		assert.Contains(t, out, "I like Rome")
	})
	t.Run("sqlite database", func(t *testing.T) {
		reader.failsWithOneLine(t, exitFail, []string{"history", "--session", "sql.json"},
			"database sql.db: its directory . is not writable", "SQLite creates the write-ahead log's sql.db-shm there even to read it",
			"or copy the session and its database to a writable directory")
	})
}

// unprivileged returns how to run the command as a user who cannot write
// what another owns, and a home directory that user can write: the test's
// own user unless that is root, then "nobody".
func unprivileged(t *testing.T) (*syscall.SysProcAttr, string) {
	home, err := os.MkdirTemp("", "wasmhist-home-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(home) })
	require.NoError(t, os.Chmod(home, 0o777))
	if os.Geteuid() != 0 {
		return nil, home
	}
	u, err := user.Lookup("nobody")
	require.NoError(t, err, "the tests run as root and need the user nobody to read as")
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	require.NoError(t, err)
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	require.NoError(t, err)
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, home
}
