package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// The storage a chat writes is checked before the first model call: a
// problem found only when the turn is committed would throw away an answer
// the user paid for and never saw.

// sqliteHeader starts every SQLite database file.
var sqliteHeader = []byte("SQLite format 3\x00")

// checkDatabase checks that path can be the plugin's SQLite database: a
// writable SQLite file, an empty file, or a file that can be created.
func checkDatabase(cmd, path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return checkDirWritable(cmd, "database", path)
	case err != nil:
		return failf(cmd, "database %s: %w: check the path and its permissions", path, err)
	case fi.IsDir():
		return failf(cmd, "database %s is a directory: pass --db with the path of a database file (it is created when missing)", path)
	case !fi.Mode().IsRegular():
		return failf(cmd, "database %s is not a regular file: pass --db with the path of a database file", path)
	case fi.Mode().Perm()&0o200 == 0:
		return failf(cmd, "database %s is read-only (mode %04o): make it writable (chmod u+w %s), or pass another --db", path, fi.Mode().Perm(), path)
	}
	if fi.Size() == 0 {
		return checkDirWritable(cmd, "database", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return failf(cmd, "database %s: %w: check its permissions", path, err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, sqliteHeader) {
		return failf(cmd, "database %s is not an SQLite database: pass --db with the plugin's database, or a new path to start one", path)
	}
	// SQLite writes its journal beside the file.
	return checkDirWritable(cmd, "database", path)
}

// isSQLiteOrEmpty reports whether path is not a regular file holding
// something other than SQLite: missing, empty, unreadable (checkDatabase
// says why) or an SQLite database.
func isSQLiteOrEmpty(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return true
	}
	head := make([]byte, len(sqliteHeader))
	_, err = io.ReadFull(f, head)
	return err == nil && bytes.Equal(head, sqliteHeader)
}

// checkSessionFile checks that the session file can be replaced: an
// existing one must be writable (a read-only file is the owner's "do not
// change this", which a rename would silently override), and its
// directory must take new files.
func checkSessionFile(cmd string, f *sessionFile) error {
	fi, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return failf(cmd, "session file %s: %w: check the path and its permissions", f.path, err)
	case fi.Mode().Perm()&0o200 == 0:
		return failf(cmd, "session file %s is read-only (mode %04o): make it writable (chmod u+w %s) to continue it, or copy it to a new name", f.path, fi.Mode().Perm(), f.path)
	}
	return checkDirWritable(cmd, "session file", f.path)
}

// checkDirWritable checks that the directory of path (created when
// missing, as the stores do) takes a new file.
func checkDirWritable(cmd, what, path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return failf(cmd, "%s %s: cannot create its directory: %w: choose a writable place", what, path, err)
	}
	tmp, err := os.CreateTemp(dir, ".wasmhist-check-*")
	if err != nil {
		return failf(cmd, "%s %s: its directory %s is not writable: %w: choose a writable place, or fix the directory's permissions", what, path, dir, err)
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return nil
}

// Where a failed turn went wrong, for advice that fits the cause.
const (
	placeModel   = "model"
	placePlugin  = "plugin"
	placeSession = "session file"
)

// failurePlace classifies a failed run by where it failed.
func failurePlace(err error) string {
	var pe *host.PluginError
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pe):
		return placePlugin
	case errors.Is(err, session.ErrStaleRevision), errors.As(err, &pathErr):
		return placeSession
	}
	return placeModel
}

// pluginAdvice is the advice for a plugin failure of a known kind, or "".
func pluginAdvice(err error) string {
	switch {
	case errors.Is(err, host.ErrTrap):
		return "the plugin crashed (the message has its first words): report it to the plugin's author; 'wasmhist conformance' on the plugin shows which calls fail"
	case errors.Is(err, host.ErrInvalidOutput) && changedState(err):
		return "the plugin answered with a state or a change the host refuses (the message says where): nothing was stored; fix the plugin"
	case errors.Is(err, host.ErrInvalidOutput):
		return "the plugin returned something the host refuses, such as a malformed stored message (the message says where): repair or clear the plugin's stored history, or fix the plugin"
	}
	return ""
}

// changedState reports whether err is a plugin's answer to an export that
// writes (store, clear, migrate_state): its new output, not what it had
// stored, is what the host refused.
func changedState(err error) bool {
	var pe *host.PluginError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Export {
	case abi.ExportStore, abi.ExportClear, abi.ExportMigrateState:
		return true
	}
	return false
}

// describePlace is the advice for a failure at place that no more specific
// rule covered.
func describePlace(place string) string {
	switch place {
	case placePlugin:
		return "the history plugin failed: the message says how; run 'wasmhist conformance' on the plugin, or check its database"
	case placeSession:
		return "the session could not be saved: check that the session file's directory is writable and has space"
	}
	return "the model call failed: check the model settings (--model, --base-url, --model-name, " + apiKeyEnv + ")"
}
