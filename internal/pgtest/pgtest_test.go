package pgtest_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// TestServer: a started server answers on its socket only, runs as an
// unprivileged user, and two servers run side by side.
func TestServer(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.Start(t), pgtest.Start(t)
	require.NotEqual(t, a.Dir, b.Dir)
	for _, s := range []*pgtest.Server{a, b} {
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		require.NoError(t, err, "connect: %s", s.Log())
		defer conn.Close(ctx)

		var who, listen string
		var pid int
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_user, current_setting('listen_addresses'), pg_backend_pid()`).Scan(&who, &listen, &pid))
		assert.Equal(t, pgtest.Superuser, who)
		assert.Empty(t, listen, "the server must not listen on TCP")

		// The backend serving us is a process of the server's user.
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat("/proc/"+strconv.Itoa(pid), &st))
		assert.NotZero(t, st.Uid, "PostgreSQL must not run as root")
		if os.Geteuid() != 0 {
			assert.Equal(t, uint32(os.Geteuid()), st.Uid)
		}

		var v string
		require.NoError(t, conn.QueryRow(ctx, `SHOW server_version`).Scan(&v))
		assert.True(t, strings.HasPrefix(v, "1"), "server_version %q", v)
	}
}

// TestCluster: the superuser is named "postgres" (so that a hostile
// "SET ROLE postgres" meets a real superuser), the contrib extensions
// that open connections are available, and Admin gives a CREATEROLE role
// that is not a superuser and owns its database.
func TestCluster(t *testing.T) {
	ctx := context.Background()
	s := pgtest.Start(t)
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var super bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = 'postgres'`).Scan(&super))
	assert.True(t, super)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_available_extensions WHERE name IN ('dblink', 'postgres_fdw')`).Scan(&n))
	assert.Equal(t, 2, n, "dblink and postgres_fdw must be installable (Debian: they ship in postgresql-<version>)")

	admin, err := pgx.Connect(ctx, s.Admin(t, "managed"))
	require.NoError(t, err)
	defer admin.Close(ctx)
	var who, owner string
	var rolsuper, createrole bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT current_user, rolsuper, rolcreaterole, pg_get_userbyid(d.datdba)
		FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()`).Scan(&who, &rolsuper, &createrole, &owner))
	assert.Equal(t, "managed", who)
	assert.False(t, rolsuper)
	assert.True(t, createrole)
	assert.Equal(t, "managed", owner)
}
