package sqlcap

import (
	"context"
	"database/sql/driver"
	"errors"
)

// maxPrepared bounds the statements one connection keeps prepared, the
// plugin's and the host's together. A turn of the sqlite plugin runs about
// a dozen distinct texts; a plugin that makes every text new (values
// written into it) fills the cache, which then starts over, at the cost
// of preparing each text once, as without a cache.
const maxPrepared = 64

// preparedKey names a kept statement: its text, and whether it was
// prepared as a plugin's (under the plugin rules) or as the host's.
type preparedKey struct {
	sql    string
	plugin bool
}

// preparedStmt is a statement of the driver's, prepared once and run many
// times.
type preparedStmt interface {
	driver.Stmt
	driver.StmtQueryContext
	driver.StmtExecContext
}

// stmt returns q prepared on c, from the statements c keeps: parsing and
// planning a statement was the largest share of SQLite's work in a turn
// (RATIONALE: "Why does the sql capability keep statements prepared?").
//
// The authorizer judges a statement while SQLite prepares it, and again
// whenever SQLite prepares it anew (after any schema change, at its next
// step), so a kept statement is one the rules in force allowed: a plugin's
// is prepared, and run, with the plugin rules on, the host's with them
// off, and the two are never shared. A text that may hold ALTER is never
// kept, since the check of its renames needs the authorizer's word at
// every run (session.exec): query runs it unprepared. keep is false when q
// was prepared for this run only: the caller closes it after use.
func (c *conn) stmt(ctx context.Context, q string, plugin bool) (s preparedStmt, keep bool, err error) {
	key := preparedKey{sql: q, plugin: plugin}
	if s, ok := c.prepared[key]; ok {
		return s, true, nil
	}
	pc, ok := c.Conn.(driver.ConnPrepareContext)
	if !ok {
		return nil, false, errors.New("sqlcap: the sqlite driver cannot prepare statements")
	}
	ds, err := pc.PrepareContext(ctx, q)
	if err != nil {
		return nil, false, err
	}
	s, ok = ds.(preparedStmt)
	if !ok {
		ds.Close()
		return nil, false, errors.New("sqlcap: the sqlite driver's statements lack contexts")
	}
	if plugin && c.policy.altered {
		// An ALTER the text did not show (session.exec refuses it).
		return s, false, nil
	}
	if len(c.prepared) >= maxPrepared {
		c.closePrepared()
	}
	if c.prepared == nil {
		c.prepared = make(map[preparedKey]preparedStmt)
	}
	c.prepared[key] = s
	return s, true, nil
}

// query runs q through a statement c keeps prepared.
func (c *conn) query(ctx context.Context, q string, args []driver.NamedValue, plugin bool) (driver.Rows, error) {
	if plugin && mayAlter(q) {
		return c.inner.QueryContext(ctx, q, args)
	}
	s, keep, err := c.stmt(ctx, q, plugin)
	if err != nil {
		return nil, err
	}
	if !keep {
		// The driver's statement owns its rows' handle: run the text
		// once, as the driver does for a statement it was not asked to
		// prepare.
		s.Close()
		return c.inner.QueryContext(ctx, q, args)
	}
	return s.QueryContext(ctx, args)
}

// exec runs q, a host statement, through a statement c keeps prepared.
func (c *conn) exec(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	s, keep, err := c.stmt(ctx, q, false)
	if err != nil {
		return nil, err
	}
	if !keep {
		defer s.Close()
	}
	return s.ExecContext(ctx, args)
}

// closePrepared finalizes every statement c keeps.
func (c *conn) closePrepared() {
	for k, s := range c.prepared {
		s.Close()
		delete(c.prepared, k)
	}
}

// Close finalizes the kept statements, then closes the connection: SQLite
// keeps a connection with statements open until they are finalized.
func (c *conn) Close() error {
	c.closePrepared()
	// Before the handle is freed, and so before SQLite can hand its
	// address to another connection.
	c.intr.close()
	err := c.Conn.Close()
	if c.tls != nil {
		c.tls.Close()
		c.tls = nil
	}
	return err
}
