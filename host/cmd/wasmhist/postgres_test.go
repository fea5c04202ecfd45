package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// TestPostgresRotateKey: 'postgres rotate-key' replaces the host key of
// the database a chat keeps its session and history in, says what it
// changed without printing the connection string, and the chat goes on
// remembering what was said; a wrong call changes nothing and says why.
func TestPostgresRotateKey(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.DSN("postgres")
	r := invocation{dir: t.TempDir(), env: []string{postgresDSNEnv + "=" + dsn, "OTHER_DSN=" + dsn}}

	r.failsWithOneLine(t, exitFail, []string{"postgres", "rotate-key"}, "no host has provisioned it", "check the connection string's database")
	r.ok(t, "chat", "--store", "postgres", "--session", "k", "--plugin", "sqlite", "--db", "postgres", "-m", "I like Thai food")
	key := func() string {
		t.Helper()
		c, err := pgx.Connect(context.Background(), dsn)
		require.NoError(t, err)
		defer c.Close(context.Background())
		var k string
		require.NoError(t, c.QueryRow(context.Background(), "SELECT key FROM wasmhist.host_key").Scan(&k))
		return k
	}
	before := key()

	out := r.ok(t, "postgres", "rotate-key")
	assert.Contains(t, out, "rotated the host key of PostgreSQL ($"+postgresDSNEnv+"): 1 plugin roles given new passwords, 0 tenant schemas renamed")
	assert.NotContains(t, out, dsn)
	assert.NotContains(t, out, before)
	after := key()
	assert.NotEqual(t, before, after)
	assert.NotContains(t, out, after)

	again := r.ok(t, "chat", "--store", "postgres", "--session", "k", "--db", "postgres", "-m", "What food do I like?")
	assert.Regexp(t, `(?m)^assistant: .*Thai`, again)

	r.ok(t, "postgres", "rotate-key", "--db", "env:OTHER_DSN")
	assert.NotEqual(t, after, key())

	r.failsWithOneLine(t, exitUsage, []string{"postgres"}, "no action", "postgres rotate-key")
	r.failsWithOneLine(t, exitUsage, []string{"postgres", "rotate"}, `unknown action "rotate"`)
	r.failsWithOneLine(t, exitUsage, []string{"postgres", "rotate-key", "--db", "env:NO_SUCH_VAR"}, "$NO_SUCH_VAR is empty")
	r.failsWithOneLine(t, exitUsage, []string{"postgres", "rotate-key", "--db", "sessions.db"}, "is not PostgreSQL")
	out = r.failsWithOneLine(t, exitUsage, []string{"postgres", dsn}, "(a connection string)")
	assert.NotContains(t, out, dsn)
}
