package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCorruptStoredSession: a stored session that is not a valid session
// is named as corrupt, with the commands that remove or replace it;
// 'session delete --force' removes it and 'session import --force'
// replaces it, each saying so.
func TestCorruptStoredSession(t *testing.T) {
	tests := []struct {
		name    string
		store   string
		corrupt func(t *testing.T, dir string)
	}{
		{"sqlite", "sessions.db", func(t *testing.T, dir string) {
			db, err := sql.Open("sqlite", filepath.Join(dir, "sessions.db"))
			require.NoError(t, err)
			defer db.Close()
			res, err := db.Exec(`UPDATE wasmhist_sessions SET data = '{"broken": true}' WHERE id = 'demo'`)
			require.NoError(t, err)
			n, err := res.RowsAffected()
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
		}},
		{"directory", "sessions/", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "sessions", "demo.json"), []byte(`{"broken": true}`), 0o600))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := invocation{dir: t.TempDir()}
			chat := []string{"chat", "--store", tc.store, "--session", "demo", "-m", "I like Italian food"}
			r.ok(t, chat...)
			exported := r.ok(t, "session", "export", "--store", tc.store, "demo")
			tc.corrupt(t, r.dir)

			advice := []string{"demo", "stored session is corrupt", "session delete --force --store " + tc.store + " demo", "session import --force --store " + tc.store}
			r.failsWithOneLine(t, exitFail, []string{"session", "show", "--store", tc.store, "demo"}, advice...)
			r.failsWithOneLine(t, exitFail, []string{"session", "delete", "--store", tc.store, "demo"}, advice...)
			r.failsWithOneLine(t, exitFail, []string{"history", "--store", tc.store, "--session", "demo"}, advice...)
			invocation{dir: r.dir, stdin: exported}.failsWithOneLine(t, exitFail, []string{"session", "import", "--store", tc.store}, advice...)

			out := r.ok(t, "session", "delete", "--force", "--store", tc.store, "demo")
			assert.Contains(t, out, "deleted session demo in ")
			assert.Contains(t, out, "which was corrupt")
			r.failsWithOneLine(t, exitFail, []string{"session", "show", "--store", tc.store, "demo"}, "not found")

			r.ok(t, chat...)
			tc.corrupt(t, r.dir)
			out = invocation{dir: r.dir, stdin: exported}.ok(t, "session", "import", "--force", "--store", tc.store)
			assert.Contains(t, out, "replacing the corrupt stored one")
			r.ok(t, "session", "validate", "--store", tc.store, "demo")
		})
	}
}
