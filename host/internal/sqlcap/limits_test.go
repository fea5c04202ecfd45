package sqlcap

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

func TestLimits(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{MaxRows: 100, MaxResultBytes: 10_000, MaxStatements: 3, MaxRequestBytes: 1000, Timeout: 200 * time.Millisecond})
	p := dbPath(t, "limits.db")
	// Setup and checks go through a store with default limits, so that a
	// slow disk cannot trip the small timeout outside the cases.
	admin := newStore(t, Limits{})
	oneCall(t, admin, p, "CREATE TABLE t(x)",
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 150) INSERT INTO t SELECT x FROM c")
	const endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c)"
	tests := []struct {
		name string
		req  abi.SQLRequest
		// poisons: the transaction may be gone, so later requests fail too.
		poisons bool
	}{
		{"too many rows", req("SELECT x FROM t"), false},
		{"too many rows over statements", abi.SQLRequest{Statements: []abi.SQLStatement{
			{SQL: "SELECT x FROM t LIMIT 60"}, {SQL: "SELECT x FROM t LIMIT 60"}}}, false},
		{"huge result", req("SELECT zeroblob(20000)"), false},
		{"huge result in many rows", req("SELECT randomblob(500) FROM t LIMIT 90"), false},
		{"endless rows", req(endless + " SELECT x FROM c"), false},
		{"too many statements", abi.SQLRequest{Statements: []abi.SQLStatement{{SQL: "SELECT 1"}, {SQL: "SELECT 1"}, {SQL: "SELECT 1"}, {SQL: "SELECT 1"}}}, false},
		{"request too large", req("SELECT ?", strings.Repeat("x", 2000)), false},
		{"runaway before the first row", req(endless + " SELECT count(*) FROM c"), true},
		{"runaway between rows", req(endless + " SELECT x FROM c WHERE x = 1 OR x % 1000000000000 = 0"), true},
		{"runaway write", req(endless + " INSERT INTO t SELECT x FROM c WHERE x % 1000000000000 = 0"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := begin(t, s, p)
			c.must(ctx, "INSERT INTO t VALUES (-1)") // must not survive the call
			start := time.Now()
			_, err := c.do(ctx, tt.req)
			require.ErrorIs(t, err, abi.ErrResourceExhausted)
			assert.LessOrEqual(t, time.Since(start), 5*time.Second, "refusal took too long")
			_, err = c.do(ctx, req("SELECT 1"))
			assert.Equal(t, tt.poisons, err != nil, "next request poisoned (err = %v)", err)
			// The plugin's export fails, so the call ends not ok.
			c.end(ctx, false)
			got := oneCall(t, admin, p, "SELECT count(*), min(x), max(x) FROM t").Results[0].Rows[0]
			assert.Equal(t, "150", string(got[0]), "table after refusal: count")
			assert.Equal(t, "1", string(got[1]), "table after refusal: min")
			assert.Equal(t, "150", string(got[2]), "table after refusal: max")
		})
	}
	checkIntegrity(t, p)
}

// TestPoisonedCallNeverCommits covers a plugin that ignores a failed request
// and returns success: what it wrote before must still be rolled back, since
// SQLite may already have rolled the transaction back after the interrupt.
func TestPoisonedCallNeverCommits(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Limits{Timeout: 100 * time.Millisecond})
	p := dbPath(t, "poison.db")
	admin := newStore(t, Limits{})
	oneCall(t, admin, p, "CREATE TABLE t(x)")
	c := begin(t, s, p)
	c.must(ctx, "INSERT INTO t VALUES (1)")
	_, err := c.do(ctx, req("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"))
	require.Error(t, err, "runaway query succeeded")
	assert.ErrorIs(t, c.call.End(ctx, true), abi.ErrResourceExhausted, "end of a call that swallowed the failure")
	got := oneCall(t, admin, p, "SELECT count(*) FROM t").Results[0].Rows[0][0]
	assert.Equal(t, "0", string(got), "rows")
}

// TestCallDeadline: the export call's own deadline interrupts a statement
// too, and the call rolls back.
func TestCallDeadline(t *testing.T) {
	s := newStore(t, Limits{Timeout: time.Minute})
	p := dbPath(t, "deadline.db")
	oneCall(t, s, p, "CREATE TABLE t(x)")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c := begin(t, s, p)
	c.must(ctx, "INSERT INTO t VALUES (1)")
	_, err := c.do(ctx, req("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"))
	require.ErrorIs(t, err, abi.ErrResourceExhausted)
	c.end(ctx, false)
	got := oneCall(t, s, p, "SELECT count(*) FROM t").Results[0].Rows[0][0]
	assert.Equal(t, "0", string(got), "rows")
}

// TestWritersHammer runs many concurrent export calls on one database, some
// taking the write lock up front and some upgrading a read transaction,
// each reading a counter and writing it back plus one. Every call must
// either succeed with its increment kept or fail and leave nothing behind.
func TestWritersHammer(t *testing.T) {
	ctx := context.Background()
	s := newStoreOpts(t, Options{Synchronous: "NORMAL"})
	p := dbPath(t, "hammer.db")
	oneCall(t, s, p, "CREATE TABLE counter(n INTEGER)", "INSERT INTO counter VALUES (0)", "CREATE TABLE log(n INTEGER UNIQUE)")
	const workers, perWorker = 8, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				c := begin(t, s, p)
				write := (w+i)%2 == 0
				resp, err := c.do(ctx, abi.SQLRequest{Write: write, Statements: []abi.SQLStatement{{SQL: "SELECT n FROM counter"}}})
				ok := err == nil
				if ok {
					n := resp.Results[0].Rows[0][0]
					_, err = c.do(ctx, abi.SQLRequest{Statements: []abi.SQLStatement{
						{SQL: "UPDATE counter SET n = n + 1"},
						{SQL: "INSERT INTO log VALUES (? + 1)", Args: []any{n}},
					}})
					ok = err == nil
				}
				// assert, not require: FailNow must not run off the test's goroutine.
				// A read that upgrades may lose the race for the write lock.
				if write {
					assert.NoError(t, err, "call failed")
				} else if err != nil {
					assert.ErrorIs(t, err, abi.ErrUnavailable, "call failed")
				}
				if err := c.call.End(ctx, ok); !assert.NoError(t, err, "end") {
					ok = false
				}
				if ok {
					mu.Lock()
					committed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	got := oneCall(t, s, p, "SELECT (SELECT n FROM counter), (SELECT count(*) FROM log), (SELECT max(n) FROM log)").Results[0].Rows[0]
	want := []string{itoaTest(committed), itoaTest(committed), itoaTest(committed)}
	for i := range want {
		require.Equal(t, want[i], string(got[i]), "counter, log rows, max = %s; want %d committed everywhere", got, committed)
	}
	assert.GreaterOrEqual(t, committed, workers*perWorker/2, "only %d of %d calls committed", committed, workers*perWorker)
	checkIntegrity(t, p)
}

func itoaTest(n int) string { return fmtInt(n) }

// TestValueLength: no string or blob a plugin's SQL makes may pass
// maxValueBytes, though the result is small: one expression otherwise
// builds up to a gigabyte in the host's memory (SQLite's own limit)
// between two checks of the call's deadline. A value just under passes.
func TestValueLength(t *testing.T) {
	ctx := context.Background()
	// A minute: building 32 MiB a character at a time is slow under the
	// race detector, and the case is about the length, not the time.
	s := newStore(t, Limits{Timeout: time.Minute})
	p := dbPath(t, "length.db")
	for _, q := range []string{
		"SELECT length(randomblob(1000000000))",
		fmt.Sprintf("SELECT length(printf('%%.*c', %d, 'x'))", maxValueBytes+1),
		fmt.Sprintf("SELECT length(zeroblob(%d))", maxValueBytes+1),
	} {
		c := begin(t, s, p)
		start := time.Now()
		_, err := c.do(ctx, req(q))
		require.Error(t, err, q)
		assert.ErrorContains(t, err, "too big", q)
		assert.Less(t, time.Since(start), 30*time.Second, q)
		c.end(ctx, false)
	}
	got := oneCall(t, s, p, fmt.Sprintf("SELECT length(zeroblob(%d))", maxValueBytes)).Results[0].Rows[0]
	assert.Equal(t, strconv.Itoa(maxValueBytes), string(got[0]))
}
