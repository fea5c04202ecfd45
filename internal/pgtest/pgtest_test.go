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
