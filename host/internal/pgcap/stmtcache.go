package pgcap

import (
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// A plugin connection keeps the plugin's statements prepared across calls,
// as pgx does for a Go program: a statement the connection has seen is
// bound to its named statement, which the server parsed and planned
// before, instead of being parsed and planned again.
//
// The host learns a call's statements while it runs and prepares them at
// its end, in the round trip of the COMMIT and the reset, after both,
// outside any transaction: a statement that no longer parses (its table
// dropped) fails alone there, and no transaction of the plugin's holds a
// prepared statement the host made.
//
// Only the plugin's statements are prepared. A plugin's statement, or a
// function of its own, can DEALLOCATE a named statement and PREPARE
// another under its name: what the host then binds is the plugin's own SQL,
// run as its statement, which it could have sent itself. The host's own
// statements stay unnamed, so no plugin can change what they run.
//
// A cached statement can go stale: the plugin deallocated it, or changed a
// table so that a "SELECT *" returns other columns ("cached plan must not
// change result type"). The statement then fails before it ran, in its
// savepoint; the host forgets it and runs it, with the statements after it
// in the request, again as unnamed statements (see session.exec).

// Bounds of one connection's cache, so that a plugin sending ever new SQL
// holds a bounded number of plans on the server.
const (
	maxCachedStatements = 64
	maxCachedSQL        = 16 << 10
)

const cacheKey = "wasmhist.statements"

// statementCache is one plugin connection's prepared statements.
type statementCache struct {
	bySQL map[string][]*cachedStatement
	n     int
	clock uint64
	// drop are statements the cache forgot that the server may still
	// hold: closed at the next call's end.
	drop []string
}

// cachedStatement is a plugin statement prepared on the connection.
type cachedStatement struct {
	name string
	sql  string
	oids []uint32
	used uint64
}

// statementsOf is pc's cache, made on first use.
func statementsOf(pc *pgconn.PgConn) *statementCache {
	m := pc.CustomData()
	c, _ := m[cacheKey].(*statementCache)
	if c == nil {
		c = &statementCache{bySQL: map[string][]*cachedStatement{}}
		m[cacheKey] = c
	}
	return c
}

// lookup returns the prepared statement of sql with parameter types oids,
// or nil.
func (c *statementCache) lookup(sql string, oids []uint32) *cachedStatement {
	e := find(c.bySQL[sql], sql, oids)
	if e != nil {
		c.clock++
		e.used = c.clock
	}
	return e
}

// find is the statement of sql with parameter types oids in list, or nil.
func find(list []*cachedStatement, sql string, oids []uint32) *cachedStatement {
	for _, e := range list {
		if e.sql == sql && slices.Equal(e.oids, oids) {
			return e
		}
	}
	return nil
}

// forget drops e from the cache; the server's statement, if it still has
// it, is closed at the next call's end.
func (c *statementCache) forget(e *cachedStatement) {
	list := c.bySQL[e.sql]
	i := slices.Index(list, e)
	if i < 0 {
		return
	}
	if len(list) == 1 {
		delete(c.bySQL, e.sql)
	} else {
		c.bySQL[e.sql] = slices.Delete(list, i, i+1)
	}
	c.n--
	c.drop = append(c.drop, e.name)
}

// add caches e, which the server has prepared.
func (c *statementCache) add(e *cachedStatement) {
	c.clock++
	e.used = c.clock
	c.bySQL[e.sql] = append(c.bySQL[e.sql], e)
	c.n++
}

// evict forgets the least recently used statements until n more fit.
func (c *statementCache) evict(n int) {
	for c.n > 0 && c.n+n > maxCachedStatements {
		var oldest *cachedStatement
		for _, list := range c.bySQL {
			for _, e := range list {
				if oldest == nil || e.used < oldest.used {
					oldest = e
				}
			}
		}
		c.forget(oldest)
	}
}

// cacheable says whether a statement that completed with tag is worth
// preparing: the statements the server plans.
func cacheable(sql string, tag pgconn.CommandTag) bool {
	if len(sql) > maxCachedSQL {
		return false
	}
	switch {
	case tag.Select(), tag.Insert(), tag.Update(), tag.Delete():
		return true
	}
	return strings.HasPrefix(tag.String(), "MERGE")
}

// learned are a call's statements to prepare at its end.
type learned struct {
	stmts []*cachedStatement
}

// note records st, which completed with tag, unless it is cached, known
// already, or not worth preparing.
func (l *learned) note(c *statementCache, st *statement, tag pgconn.CommandTag) {
	if len(l.stmts) >= maxCachedStatements || !cacheable(st.sql, tag) {
		return
	}
	if find(c.bySQL[st.sql], st.sql, st.oids) != nil || find(l.stmts, st.sql, st.oids) != nil {
		return
	}
	l.stmts = append(l.stmts, &cachedStatement{name: "wasmhist_" + newGuardToken()[:16], sql: st.sql, oids: slices.Clone(st.oids)})
}

// staleStatement says whether err, from a cached statement that sent no
// rows, means the cache is stale rather than the statement wrong: the
// server's own check when it binds a named statement, that it exists (the
// plugin may have deallocated it) and that its result's columns are the
// same. The routine and the absence of a context (which an error raised
// inside a function carries) tell the server's check from the same
// SQLSTATE raised by the plugin's code, and neither depends on the
// language of the server's messages.
func staleStatement(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	if pe.Where != "" {
		// Raised inside a function: the plugin's code ran.
		return false
	}
	return (pe.Code == "26000" && pe.Routine == "FetchPreparedStatement") ||
		(pe.Code == "0A000" && pe.Routine == "RevalidateCachedQuery")
}

// errStale is exec's answer when statement k's cached form was stale: the
// statement was undone and the caller runs it, and what followed it,
// again.
var errStale = errors.New("pgcap: a cached statement was stale")
