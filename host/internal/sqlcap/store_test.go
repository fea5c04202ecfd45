package sqlcap

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreClosesLeastRecentlyUsed: past MaxOpenDatabases the Store closes
// the file used longest ago, never one a call is using, and reopens a closed
// file on its next use with its data intact.
func TestStoreClosesLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	s := newStoreOpts(t, Options{MaxOpenDatabases: 2})
	dir := t.TempDir()
	path := func(i int) string { return fmt.Sprintf("%s/tenant%d.db", dir, i) }

	busy := begin(t, s, path(0))
	busy.must(ctx, "CREATE TABLE t(x)", "INSERT INTO t VALUES (0)")
	oneCall(t, s, path(1), "CREATE TABLE t(x)", "INSERT INTO t VALUES (1)")
	oneCall(t, s, path(2), "CREATE TABLE t(x)", "INSERT INTO t VALUES (2)")
	assert.Equal(t, 2, s.OpenDatabases(), "tenant1 closed to make room; tenant0 is in use")
	busy.end(ctx, true)

	oneCall(t, s, path(3), "CREATE TABLE t(x)")
	assert.Equal(t, 2, s.OpenDatabases())
	for i := range 3 {
		got := oneCall(t, s, path(i), "SELECT x FROM t").Results[0].Rows
		require.Len(t, got, 1, "tenant%d after reopening", i)
		assert.JSONEq(t, fmt.Sprint(i), string(got[0][0]))
	}
	assert.Equal(t, 2, s.OpenDatabases())
}

// TestTwoStoresShareAFile: the Stores of two Hosts do not share their
// writer queue, so their writers to one file meet at SQLite's lock and wait
// there (busy_timeout) instead of failing with SQLITE_BUSY.
func TestTwoStoresShareAFile(t *testing.T) {
	ctx := context.Background()
	a, b := newStore(t, Limits{}), newStore(t, Limits{})
	p := dbPath(t, "shared.db")
	oneCall(t, a, p, "CREATE TABLE t(x)")
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers*each)
	for _, s := range []*Store{a, b} {
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					c := begin(t, s, p)
					_, err := c.do(ctx, req("INSERT INTO t VALUES (1)"))
					if err == nil {
						err = c.call.End(ctx, true)
					} else {
						c.call.End(ctx, false)
					}
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := oneCall(t, b, p, "SELECT count(*) FROM t").Results[0].Rows[0][0]
	assert.JSONEq(t, fmt.Sprint(2*writers*each), string(got))
}
