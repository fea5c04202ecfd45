package pgcap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzStatementCache drives one connection's cache through calls of new,
// repeated and stale statements: it never holds more than its bound once a
// call's statements are prepared, its count matches what it holds, and
// every statement it forgot is closed on the server, once.
func FuzzStatementCache(f *testing.F) {
	f.Add(uint64(1), uint8(10))
	f.Add(uint64(7), uint8(200))
	f.Fuzz(func(t *testing.T, seed uint64, distinct uint8) {
		r := rand.New(rand.NewPCG(seed, 0))
		c := &statementCache{bySQL: map[string][]*cachedStatement{}}
		server := map[string]bool{} // the names the server holds
		for range 50 {
			var l learned
			for range r.IntN(3 * maxCachedStatements) {
				st := &statement{sql: fmt.Sprintf("SELECT %d", r.IntN(int(distinct)+1)), oids: []uint32{uint32(r.IntN(2))}}
				if e := c.lookup(st.sql, st.oids); e != nil {
					if r.IntN(10) == 0 {
						c.forget(e) // stale
					}
					continue
				}
				l.note(c, st, pgconn.NewCommandTag("SELECT 1"))
			}
			require.LessOrEqual(t, len(l.stmts), maxCachedStatements)
			// As finish does: evict, close what was forgotten, prepare.
			c.evict(len(l.stmts))
			for _, name := range c.drop {
				require.True(t, server[name], "closed %s twice, or one never prepared", name)
				delete(server, name)
			}
			c.drop = nil
			for _, e := range l.stmts {
				c.add(e)
				server[e.name] = true
			}
			held := 0
			for _, list := range c.bySQL {
				held += len(list)
			}
			assert.Equal(t, held, c.n)
			assert.Equal(t, len(server), c.n, "the server holds statements the cache forgot")
			assert.LessOrEqual(t, c.n, maxCachedStatements)
		}
	})
}

func TestCacheable(t *testing.T) {
	for tag, want := range map[string]bool{
		"SELECT 3": true, "INSERT 0 1": true, "UPDATE 2": true, "DELETE 0": true, "MERGE 1": true,
		"CREATE TABLE": false, "SET": false, "DO": false, "PREPARE": false,
	} {
		assert.Equal(t, want, cacheable("x", pgconn.NewCommandTag(tag)), tag)
	}
	assert.False(t, cacheable(string(make([]byte, maxCachedSQL+1)), pgconn.NewCommandTag("SELECT 1")))
}

func TestStaleStatement(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "26000", Message: `prepared statement "x" does not exist`, Routine: "FetchPreparedStatement"}, true},
		{&pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type", Routine: "RevalidateCachedQuery"}, true},
		// A server that speaks another language names the same routine.
		{&pgconn.PgError{Code: "0A000", Message: "zwischengespeicherter Plan darf den Ergebnistyp nicht ändern", Routine: "RevalidateCachedQuery"}, true},
		// The same codes raised by the plugin's own code.
		{&pgconn.PgError{Code: "26000", Message: `prepared statement "x" does not exist`, Routine: "exec_stmt_raise"}, false},
		{&pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type", Routine: "exec_stmt_raise"}, false},
		// The server's own check, but inside a function of the plugin's.
		{&pgconn.PgError{Code: "26000", Message: `prepared statement "nosuch" does not exist`, Routine: "FetchPreparedStatement",
			Where: "SQL statement \"DEALLOCATE nosuch\"\nPL/pgSQL function f() line 1 at EXECUTE"}, false},
		{&pgconn.PgError{Code: "0A000", Message: "FOR UPDATE is not allowed with aggregate functions", Routine: "CheckSelectLocking"}, false},
		{&pgconn.PgError{Code: "42P01", Message: `relation "t" does not exist`}, false},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "26000", Routine: "FetchPreparedStatement"}), true},
		{errors.New("connection lost"), false},
	} {
		assert.Equal(t, tt.want, staleStatement(tt.err), "%v", tt.err)
	}
}
