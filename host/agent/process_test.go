//go:build !wasip1

package agent_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// processKind is a pairing of plugin database and session store for the
// process tests: setup returns commitchild's -db and -store, and a check
// that reads back the plugin's rows (each "role:text", in order) and the
// session's revision.
type processKind struct {
	name       string
	killWindow int // µs after the child is ready within which it is killed
	setup      func(t *testing.T) (db, store string, check func(t *testing.T) ([]string, int64))
}

func sqliteKind(name string, i int, storeSpec func(dir, db string) string) processKind {
	return processKind{name, 40_000, func(t *testing.T) (string, string, func(*testing.T) ([]string, int64)) {
		dir := t.TempDir()
		db := filepath.Join(dir, "history.db")
		return db, storeSpec(dir, db), func(t *testing.T) ([]string, int64) {
			rig := &commitRig{db: db, store: storeKinds[i].open(t, dir, db)}
			return rig.rows(t), rig.revision(t, "s")
		}
	}}
}

func postgresKind(name string, sameDB bool) processKind {
	return processKind{name, 250_000, func(t *testing.T) (string, string, func(*testing.T) ([]string, int64)) {
		dsn := pgtest.Start(t).DSN("postgres")
		dir := t.TempDir()
		storeArg := "file:" + filepath.Join(dir, "sessions")
		if sameDB {
			storeArg = "postgres:" + dsn
		}
		return "postgres:" + dsn, storeArg, func(t *testing.T) ([]string, int64) {
			ctx := context.Background()
			rows := pgRows(t, dsn, "history")
			var st store.Store
			if sameDB {
				ps, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: "main"})
				require.NoError(t, err)
				defer ps.Close()
				st = ps
			} else {
				fs, err := store.NewDir(filepath.Join(dir, "sessions"))
				require.NoError(t, err)
				st = fs
			}
			sess, err := st.Load(ctx, "s")
			require.NoError(t, err)
			return rows, sess.Revision
		}
	}}
}

// processKinds are the pairings the process tests run: a session file, a
// SQLite store on the plugin's file and on another, PostgreSQL for both,
// and a session file with the plugin's data in PostgreSQL.
func processKinds() []processKind {
	return []processKind{
		sqliteKind("file", 0, func(dir, _ string) string { return "file:" + filepath.Join(dir, "sessions") }),
		sqliteKind("sqlite-same-db", 1, func(_, db string) string { return "sqlite:" + db }),
		sqliteKind("sqlite-other-db", 2, func(dir, _ string) string { return "sqlite:" + filepath.Join(dir, "sessions.db") }),
		postgresKind("postgres-same-db", true),
		postgresKind("file+postgres", false),
	}
}

// buildCommitChild compiles testdata/commitchild without the race detector,
// whatever this binary was built with: it starts hundreds of times.
func buildCommitChild(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "commitchild")
	b, err := exec.Command(sdktest.GoCommand(), "build", "-o", out, "./testdata/commitchild").CombinedOutput()
	require.NoError(t, err, "build commit child:\n%s", b)
	return out
}

// child is one started commitchild.
type child struct {
	cmd  *exec.Cmd
	out  *bufio.Scanner
	errb *strings.Builder
}

func startChild(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var errb strings.Builder
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	return &child{cmd: cmd, out: bufio.NewScanner(stdout), errb: &errb}
}

// lines reads the child's output until it ends, sending each line.
func (c *child) lines() <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		for c.out.Scan() {
			ch <- c.out.Text()
		}
	}()
	return ch
}

// wantRows is the plugin's database after lines 0..n-1, each once.
func wantRows(lines []int) []string {
	var out []string
	for _, i := range lines {
		out = append(out, fmt.Sprintf("user:line %d", i), fmt.Sprintf("assistant:echo line %d", i))
	}
	return out
}

func crashSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("WASMHIST_CRASH_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "WASMHIST_CRASH_SEED")
	}
	t.Logf("seed %d (WASMHIST_CRASH_SEED=%d reruns these kill points)", seed, seed)
	return seed
}

// TestCommitUnderProcessKill kills a process running turns with SIGKILL at
// random points, 50 times per session store, and restarts it on the line
// it was running, with the same run id, as a caller that never saw the
// outcome would. Afterwards the plugin's database holds every line once,
// in order, each turn whole; the session's revision counts exactly those
// commits; SQLite's integrity check passes. A kill between the database's
// commit and the session file's is repaired by the next run.
//
// It proves atomicity when a process dies, not durability against power
// loss: SIGKILL leaves the kernel's page cache. The seed is logged; set
// WASMHIST_CRASH_SEED to run the same kill points again.
func TestCommitUnderProcessKill(t *testing.T) {
	const kills = 50
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	bin := buildCommitChild(t)
	seed := crashSeed(t)
	for k, kind := range processKinds() {
		t.Run(kind.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(k)))
			db, store, check := kind.setup(t)
			args := func(mode string, line int) []string {
				return []string{"-wasm", wasm, "-db", db, "-store", store, "-session", "s", "-mode", mode, "-line", strconv.Itoa(line)}
			}
			next := 0
			for range kills {
				c := startChild(t, bin, args("loop", next)...)
				ch := c.lines()
				require.Equal(t, "ready", <-ch, "child did not start: %s", c.errb)
				// A kill lands anywhere from the child's first turn (which
				// provisions, on PostgreSQL) to a few turns later.
				time.Sleep(time.Duration(rng.IntN(kind.killWindow)) * time.Microsecond)
				require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
				for l := range ch {
					i, err := strconv.Atoi(strings.TrimPrefix(l, "ack "))
					require.NoError(t, err, "child said %q", l)
					require.Equal(t, next, i, "acks out of order")
					next++
				}
				c.cmd.Wait()
				require.NotContains(t, c.errb.String(), "commitchild:", "the child failed rather than being killed")
			}
			// One last run, not killed, brings a lagging store up to date
			// and proves the session goes on.
			c := startChild(t, bin, args("once", next)...)
			var out []string
			for l := range c.lines() {
				out = append(out, l)
			}
			require.NoError(t, c.cmd.Wait(), "%s", c.errb)
			require.Equal(t, []string{"ready", "ack " + strconv.Itoa(next)}, out)
			lines := make([]int, next+1)
			for i := range lines {
				lines[i] = i
			}
			rows, rev := check(t)
			require.Equal(t, wantRows(lines), rows, "every line once, in order")
			require.EqualValues(t, next+1, rev, "one commit per line")
			t.Logf("%s: %d lines committed across %d kills", kind.name, next+1, kills)
		})
	}
}

// TestConcurrentProcessesOneSession starts 20 processes at once, each
// running one line on the same session and retrying on a stale revision.
// The stored history holds exactly the lines that were acknowledged, each
// once, in the order of the session's commits, for every session store.
func TestConcurrentProcessesOneSession(t *testing.T) {
	const procs = 20
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	bin := buildCommitChild(t)
	for _, kind := range processKinds() {
		t.Run(kind.name, func(t *testing.T) {
			db, store, check := kind.setup(t)
			var (
				mu      sync.Mutex
				acked   = map[int]bool{}
				refused = map[int]bool{}
				wg      sync.WaitGroup
			)
			for i := range procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := startChild(t, bin, "-wasm", wasm, "-db", db, "-store", store, "-session", "s", "-mode", "once", "-line", strconv.Itoa(i))
					var out []string
					for l := range c.lines() {
						out = append(out, l)
					}
					err := c.cmd.Wait()
					mu.Lock()
					defer mu.Unlock()
					if !assert.NoError(t, err, "line %d: %s", i, c.errb) {
						return
					}
					switch strings.Join(out, ",") {
					case "ready,ack " + strconv.Itoa(i):
						acked[i] = true
					case "ready,refused " + strconv.Itoa(i):
						refused[i] = true
					default:
						t.Errorf("line %d: child said %q", i, out)
					}
				}()
			}
			wg.Wait()
			require.Len(t, acked, procs-len(refused))
			rows, rev := check(t)
			require.Len(t, rows, 2*len(acked), "exactly the acknowledged turns: %v", rows)
			var order []int
			for j := 0; j < len(rows); j += 2 {
				var i int
				_, err := fmt.Sscanf(rows[j], "user:line %d", &i)
				require.NoError(t, err, "row %q", rows[j])
				require.True(t, acked[i], "line %d stored but not acknowledged", i)
				order = append(order, i)
			}
			require.Equal(t, wantRows(order), rows, "each turn whole, each line once")
			require.EqualValues(t, len(acked), rev, "one commit per acknowledged line")
			t.Logf("%s: %d acknowledged, %d refused", kind.name, len(acked), len(refused))
		})
	}
}
