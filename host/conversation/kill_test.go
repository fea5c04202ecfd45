package conversation_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestImportUnderProcessKill: a process importing a 2,000-message
// conversation into the sqlite plugin (the session store in the same
// file) is killed with SIGKILL at random points of the import; afterwards
// the file holds the whole conversation, with its session, or nothing of
// it, and passes SQLite's integrity check. The seed is logged.
func TestImportUnderProcessKill(t *testing.T) {
	const messages = 2000
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	bin := filepath.Join(t.TempDir(), "importchild")
	out, err := exec.Command(sdktest.GoCommand(), "build", "-o", bin, "./testdata/importchild").CombinedOutput()
	require.NoError(t, err, "build import child:\n%s", out)

	start := func(db string) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(bin, wasm, db, "s", fmt.Sprint(messages))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(stdout)
		require.True(t, lines.Scan(), "the child did not start")
		require.Equal(t, "started", lines.Text())
		return cmd, lines
	}
	// One whole import, timed from its start, bounds where the kills fall.
	cmd, lines := start(filepath.Join(t.TempDir(), "whole.db"))
	began := time.Now()
	require.True(t, lines.Scan())
	require.Equal(t, "done", lines.Text())
	require.NoError(t, cmd.Wait())
	whole := time.Since(began)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, a whole import %s", seed, whole)
	rng := rand.New(rand.NewPCG(seed, 0))
	outcomes := map[string]int{}
	for i := range 12 {
		db := filepath.Join(t.TempDir(), fmt.Sprint("kill", i, ".db"))
		cmd, _ := start(db)
		time.Sleep(time.Duration(rng.Int64N(int64(whole) + 1)))
		require.NoError(t, cmd.Process.Kill())
		cmd.Wait()

		rows := sqliteRows(t, db)
		st, err := sqlitestore.Open(db)
		require.NoError(t, err)
		s, lerr := st.Load(context.Background(), "s")
		st.Close()
		switch {
		case lerr == nil:
			assert.Equal(t, messages, rows, "kill %d: the session is stored but its history is not whole", i)
			assert.NotZero(t, s.Revision)
			outcomes["whole"]++
		default:
			require.ErrorIs(t, lerr, session.ErrNotFound, "kill %d", i)
			assert.Zero(t, rows, "kill %d: rows of an import that did not commit remain", i)
			outcomes["nothing"]++
		}
		integrity(t, db)
	}
	t.Logf("outcomes: %v", outcomes)
	assert.NotZero(t, outcomes["nothing"], "no kill landed inside an import: the test checked nothing")
}

func integrity(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	var res string
	require.NoError(t, db.QueryRow(`PRAGMA integrity_check`).Scan(&res))
	assert.Equal(t, "ok", res, path)
}
