package sqlcap

import (
	"context"
	"database/sql/driver"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// run serves one request of the export call.
func (s *session) run(ctx context.Context, request []byte) ([]byte, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	if err := s.limits.CheckRequest(len(request)); err != nil {
		return nil, err
	}
	stmts, write, err := decodeRequest(request)
	if err != nil {
		return nil, err
	}
	if err := s.limits.CheckStatements(len(stmts)); err != nil {
		return nil, err
	}
	if !s.began {
		if err := s.begin(ctx, write); err != nil {
			return nil, s.fail(ctx, err)
		}
	}
	// The time limit starts once the transaction holds what it waited
	// for: the wait is the host's (see begin).
	rctx, cancel := context.WithTimeout(ctx, s.limits.Timeout)
	defer cancel()
	c, err := s.driverConn()
	if err != nil {
		return nil, s.fail(rctx, err)
	}
	// The statements run with a context that never ends: the interrupter
	// stops them at rctx's end instead of the driver (interrupt.go).
	stop := c.intr.watch(rctx, c.callTLS())
	defer stop()
	sctx := context.WithoutCancel(rctx)
	out := newResultWriter(s.limits)
	for i, st := range stmts {
		if err := s.exec(sctx, c, st, out); err != nil {
			var ae *abi.Error
			if errors.As(err, &ae) && len(stmts) > 1 {
				err = sqlwire.InStatement(ae, i)
			}
			return nil, s.fail(rctx, err)
		}
	}
	return out.finish(), nil
}

// begin opens the call's transaction; a writing one first takes the write
// lock, behind this process's other writers (in order, in Go) and then
// another process's (SQLite's busy handler). That wait is the host's, not
// the plugin's: it is not part of the request's time limit, the call's
// clock stands still meanwhile (capability.Pause), and it is bounded by
// Options.BusyTimeout, past which the request fails with a busyError.
func (s *session) begin(ctx context.Context, write bool) error {
	if !write {
		// A deferred BEGIN takes no lock, so it cannot wait: a context
		// that never ends spares the driver's watcher goroutine.
		if err := s.hostExec(context.WithoutCancel(ctx), "BEGIN"); err != nil {
			return err
		}
		s.began = true
		return nil
	}
	resume := capability.Pause(ctx)
	defer resume()
	wait := s.store.opts.BusyTimeout
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	busy := &busyError{path: s.db.path, wait: wait}
	select {
	case s.db.writer <- struct{}{}:
		s.writer = true
	case <-wctx.Done():
		return waitFailed(ctx, busy)
	}
	if err := s.beginImmediate(wctx); err != nil {
		if ctx.Err() != nil || wctx.Err() != nil || sqliteCode(err) == sqlite3.SQLITE_BUSY {
			return waitFailed(ctx, busy)
		}
		return err
	}
	s.began = true
	return nil
}

// beginImmediate takes the write lock until wctx ends. The interrupter,
// not the driver, stops the wait at wctx's end: given a context that can
// end, the driver starts a goroutine to watch it for every statement, and
// waking that goroutine cost a writing call about 40 µs.
func (s *session) beginImmediate(wctx context.Context) error {
	c, err := s.driverConn()
	if err != nil {
		return err
	}
	stop := c.intr.watch(wctx, c.callTLS())
	defer stop()
	if err := c.intr.check(); err != nil {
		return err
	}
	_, err = c.exec(context.WithoutCancel(wctx), "BEGIN IMMEDIATE", nil)
	return err
}

// waitFailed is the error of a write-lock wait that ended unanswered:
// errEndedWaiting when the call's context ended, busy when the wait ran
// out.
func waitFailed(ctx context.Context, busy *busyError) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", errEndedWaiting, ctx.Err())
	}
	return busy
}

// errEndedWaiting is a call that ended (its context cancelled by the
// host) while it waited for the write lock: the wait is the host's, so the
// plugin is not told it exceeded a limit.
var errEndedWaiting = errors.New("sqlcap: the call ended while it waited for the write lock")

// busyError is a write lock another writer held past Options.BusyTimeout.
type busyError struct {
	path string
	wait time.Duration
}

func (e *busyError) Error() string {
	return fmt.Sprintf("sqlcap: %s: %v: another writer held its write lock for over %s: run again, or keep data many processes write at once in PostgreSQL", e.path, txn.ErrBusy, e.wait)
}

func (e *busyError) Unwrap() error { return txn.ErrBusy }

// End commits when ok and nothing failed, else rolls back, and returns the
// connection to the pool. It runs even when the export call's context has
// ended (a timed-out call must still roll back).
func (s *session) End(ctx context.Context, ok bool) error {
	ctx = context.WithoutCancel(ctx)
	if s.ended {
		return nil
	}
	s.ended = true
	defer func() {
		if s.writer {
			<-s.db.writer
			s.writer = false
		}
		s.conn.Close()
		s.store.done(s.db)
	}()
	if !s.began {
		if ok && s.failed != nil {
			// The transaction never began (busy): nothing the plugin
			// asked for was written.
			return fmt.Errorf("sqlcap: %s: the call's transaction could not begin: %w", s.db.path, s.failed)
		}
		return nil
	}
	s.began = false
	if ok && s.failed == nil {
		err := s.hostExec(ctx, "COMMIT")
		if err == nil {
			return nil
		}
		// A failed COMMIT leaves the transaction open; close it so the
		// pooled connection starts clean.
		s.hostExec(ctx, "ROLLBACK")
		return fmt.Errorf("sqlcap: commit %s: %w", s.db.path, err)
	}
	if err := s.hostExec(ctx, "ROLLBACK"); err != nil && !noTransaction(err) {
		return fmt.Errorf("sqlcap: roll back %s: %w", s.db.path, err)
	}
	if ok {
		// The plugin went on after a request that lost the transaction and
		// reported success: its call must fail, or the caller would take
		// writes that were rolled back for committed.
		return fmt.Errorf("sqlcap: the call's transaction was rolled back after: %w", s.failed)
	}
	return nil
}

// noTransaction reports SQLite's answer to a ROLLBACK after it already rolled
// the transaction back itself (after an interrupt or I/O error).
func noTransaction(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no transaction is active")
}

// hostExec runs a statement of the host's own with the plugin rules off.
func (s *session) hostExec(ctx context.Context, q string) error {
	return s.conn.Raw(func(dc any) error {
		_, err := dc.(*conn).exec(ctx, q, nil)
		return err
	})
}

// fail maps err for the plugin and poisons the session when the transaction
// may be gone.
func (s *session) fail(ctx context.Context, err error) error {
	ae, poison := s.mapError(ctx, err)
	var out error = ae
	if be := (*busyError)(nil); errors.As(err, &be) {
		out = &capability.HostFault{Plugin: ae, Cause: be}
	}
	if poison {
		s.failed = out
	}
	return out
}

// driverConn is the session's driver connection, which the session holds
// alone until End.
func (s *session) driverConn() (*conn, error) {
	if s.dc == nil {
		if err := s.conn.Raw(func(dc any) error {
			s.dc = dc.(*conn)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return s.dc, nil
}

// exec runs a plugin's statement on c, the session's connection, with a
// context that never ends: c's interrupter bounds it (see run).
func (s *session) exec(ctx context.Context, c *conn, st statement, out *resultWriter) error {
	return s.conn.Raw(func(any) error {
		if err := c.intr.check(); err != nil {
			return err
		}
		var before map[string]bool
		if mayAlter(st.SQL) {
			var err error
			if before, err = hostNames(ctx, c.inner); err != nil {
				return err
			}
		}
		c.policy.denied, c.policy.altered = "", false
		c.policy.plugin.Store(true)
		rows, err := c.query(ctx, st.SQL, st.Args, true)
		if err != nil {
			c.policy.plugin.Store(false)
			if c.policy.altered {
				// Part of a string of statements may have run.
				if rerr := checkRenames(ctx, c.inner, before); rerr != nil {
					return rerr
				}
			}
			return s.withDenial(c, err)
		}
		err = out.statement(rows, st.JSON, c.intr)
		c.policy.plugin.Store(false)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if c.policy.altered {
			if rerr := checkRenames(ctx, c.inner, before); rerr != nil {
				return rerr
			}
		}
		if err != nil {
			return s.withDenial(c, err)
		}
		if !out.hadColumns() {
			return out.counts(ctx, c)
		}
		return nil
	})
}

// denial carries the authorizer's reason next to SQLite's generic error.
// ran: the refused statement had already run, so only rolling the
// transaction back undoes it.
type denial struct {
	reason string
	err    error
	ran    bool
}

// mayAlter reports whether sql may hold an ALTER statement, whose renames
// are checked against a list of the host's names taken before it runs.
// The text only decides whether to take the list: the authorizer says
// whether a table was altered, and an ALTER the text missed is refused
// (checkRenames without a list).
func mayAlter(sql string) bool {
	// ASCII case folding, a byte at a time: no other letter folds to one
	// of "alter" (strings.EqualFold on each 5-byte window said the same,
	// at about ten times the instructions).
	for i := 0; i+5 <= len(sql); i++ {
		if sql[i]|0x20 == 'a' && sql[i+1]|0x20 == 'l' && sql[i+2]|0x20 == 't' && sql[i+3]|0x20 == 'e' && sql[i+4]|0x20 == 'r' {
			return true
		}
	}
	return false
}

// hostNames lists the schema objects named with txn.Prefix.
func hostNames(ctx context.Context, c sqlite.ExecQuerierContext) (map[string]bool, error) {
	rows, err := c.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE name LIKE '`+strings.ReplaceAll(txn.Prefix, "_", `\_`)+`%' ESCAPE '\'`, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names := map[string]bool{}
	v := make([]driver.Value, 1)
	for {
		switch err := rows.Next(v); {
		case err == io.EOF:
			return names, nil
		case err != nil:
			return nil, err
		}
		name, _ := v[0].(string)
		names[strings.ToLower(name)] = true
	}
}

// checkRenames refuses an ALTER TABLE that renamed a plugin's table (or a
// virtual table's shadow tables) into the host's names: the authorizer
// sees the old name only, so the names are compared with the list taken
// before. The rename has run: the denial poisons the transaction, whose
// rollback undoes it.
func checkRenames(ctx context.Context, c sqlite.ExecQuerierContext, before map[string]bool) error {
	if before == nil {
		return &denial{reason: "ALTER TABLE must be written as such in the statement's text", ran: true}
	}
	after, err := hostNames(ctx, c)
	if err != nil {
		return &denial{reason: "cannot check the names ALTER TABLE left: " + err.Error(), err: err, ran: true}
	}
	for name := range after {
		if !before[name] {
			return &denial{reason: "names starting with " + quote(txn.Prefix) + " are the host's: a table cannot be renamed to " + quote(name), ran: true}
		}
	}
	return nil
}

func (d *denial) Error() string { return d.reason }
func (d *denial) Unwrap() error { return d.err }

func (s *session) withDenial(c *conn, err error) error {
	// SQLite reports a refused function as a plain SQLITE_ERROR; the
	// authorizer's record, reset before each statement, is what tells.
	if c.policy.denied != "" {
		return &denial{reason: c.policy.denied, err: err}
	}
	return err
}

func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return -1
}

// mapError turns err into the *abi.Error the plugin sees, and says whether
// the transaction may have been lost.
func (s *session) mapError(ctx context.Context, err error) (*abi.Error, bool) {
	var ae *abi.Error
	if errors.As(err, &ae) {
		return ae, false
	}
	var be *busyError
	if errors.As(err, &be) {
		// The plugin is told the database was busy, not where it is; the
		// call fails with the host's error (capability.HostFault).
		return abi.Errorf(abi.CodeUnavailable, "sql: the database is busy: another writer held its write lock for over %s", be.wait), true
	}
	if errors.Is(err, errEndedWaiting) {
		return abi.Errorf(abi.CodeUnavailable, "sql: the call ended while it waited for the database's write lock"), true
	}
	var d *denial
	if errors.As(err, &d) {
		return abi.Errorf(abi.CodePermissionDenied, "sql: %s", d.reason), d.ran
	}
	if ctx.Err() != nil || errors.Is(err, errInterrupted) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return abi.Errorf(abi.CodeResourceExhausted, "sql: request exceeded its time limit of %s and was interrupted", s.limits.Timeout), true
	}
	msg := "sql: " + err.Error()
	switch sqliteCode(err) {
	case sqlite3.SQLITE_AUTH, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY:
		return abi.Errorf(abi.CodePermissionDenied, "%s", msg), false
	case sqlite3.SQLITE_CONSTRAINT:
		return abi.Errorf(abi.CodeFailedPrecondition, "%s", msg), false
	case sqlite3.SQLITE_ERROR, sqlite3.SQLITE_RANGE, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG:
		return abi.Errorf(abi.CodeInvalidArgument, "%s", msg), false
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return abi.Errorf(abi.CodeUnavailable, "%s", msg), true
	case sqlite3.SQLITE_INTERRUPT:
		return abi.Errorf(abi.CodeResourceExhausted, "sql: request exceeded its time limit of %s and was interrupted", s.limits.Timeout), true
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOMEM:
		return abi.Errorf(abi.CodeResourceExhausted, "%s", msg), true
	}
	return abi.Errorf(abi.CodeInternal, "%s", msg), true
}

// statement is one decoded request statement.
type statement = sqlwire.Statement[driver.NamedValue]

type wireRequest struct {
	Statements []sqlwire.WireStatement `json:"statements"`
	Write      bool                    `json:"write"`
}

func decodeRequest(b []byte) ([]statement, bool, error) {
	var req wireRequest
	if err := sqlwire.DecodeRequest(b, &req, &req.Statements, &req.Write); err != nil {
		return nil, false, err
	}
	out, err := sqlwire.DecodeStatements(req.Statements, nil, decodeArg)
	if err != nil {
		return nil, false, err
	}
	return out, req.Write, nil
}

// decodeArg makes argument j's value one SQLite takes: booleans are
// integers and a blob is never nil (nil would be NULL).
func decodeArg(j int, v any) (driver.NamedValue, error) {
	switch w := v.(type) {
	case bool:
		if w {
			v = int64(1)
		} else {
			v = int64(0)
		}
	case []byte:
		if w == nil {
			v = []byte{}
		}
	}
	return driver.NamedValue{Ordinal: j + 1, Value: v}, nil
}

// resultWriter encodes results straight to JSON while counting rows and
// bytes against the request's limits.
type resultWriter struct {
	sqlwire.Writer
	columns bool
	dest    []driver.Value
}

func newResultWriter(l Limits) *resultWriter {
	return &resultWriter{Writer: sqlwire.NewWriter(l)}
}

func (w *resultWriter) hadColumns() bool { return w.columns }

func (w *resultWriter) statement(rows driver.Rows, jsonCols map[string]bool, intr *interrupter) error {
	w.Begin()
	cols := rows.Columns()
	w.columns = len(cols) > 0
	if !w.columns {
		return nil
	}
	for i, c := range cols {
		w.Column(i, c)
	}
	w.Rows()
	var asJSON []bool
	if len(jsonCols) > 0 {
		asJSON = make([]bool, len(cols))
		for i, c := range cols {
			asJSON[i] = jsonCols[c]
		}
	}
	if cap(w.dest) < len(cols) {
		w.dest = make([]driver.Value, len(cols))
	}
	dest := w.dest[:len(cols)]
	for r := 0; ; r++ {
		// The request may have been interrupted between two steps, while
		// no statement ran for SQLite to stop.
		if err := intr.check(); err != nil {
			return err
		}
		err := rows.Next(dest)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := w.Row(r); err != nil {
			return err
		}
		for i, v := range dest {
			w.Value(i)
			if asJSON != nil && asJSON[i] {
				var err error
				if w.Buf, err = appendJSON(w.Buf, cols[i], v); err != nil {
					return err
				}
				continue
			}
			w.Buf = appendValue(w.Buf, v)
		}
		if err := w.EndRow(); err != nil {
			return err
		}
	}
	w.End()
	return nil
}

// counts completes a result without columns with the statement's changes.
func (w *resultWriter) counts(ctx context.Context, c *conn) error {
	rows, err := c.query(ctx, "SELECT changes(), last_insert_rowid()", nil, false)
	if err != nil {
		return err
	}
	defer rows.Close()
	v := make([]driver.Value, 2)
	if err := rows.Next(v); err != nil {
		return err
	}
	changes, _ := v[0].(int64)
	last, _ := v[1].(int64)
	w.Buf = append(w.Buf, `"rows_affected":`...)
	w.Buf = strconv.AppendInt(w.Buf, changes, 10)
	w.Buf = append(w.Buf, `,"last_insert_id":`...)
	w.Buf = strconv.AppendInt(w.Buf, last, 10)
	w.Buf = append(w.Buf, '}')
	return nil
}

// finish closes the results and names the dialect (ABI 1.2).
func (w *resultWriter) finish() []byte { return w.Finish(abi.DialectSQLite) }

func appendValue(b []byte, v driver.Value) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		switch {
		case math.IsInf(v, 1):
			return append(b, `"+Inf"`...)
		case math.IsInf(v, -1):
			return append(b, `"-Inf"`...)
		case math.IsNaN(v):
			return append(b, "null"...)
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case string:
		return sqlwire.AppendString(b, v)
	case []byte:
		b = append(b, `{"blob":"`...)
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, `"}`...)
	case bool:
		if v {
			return append(b, '1')
		}
		return append(b, '0')
	case time.Time:
		// The driver parses values of columns declared DATE, DATETIME or
		// TIMESTAMP; hand them back as text.
		return sqlwire.AppendString(b, v.Format(time.RFC3339Nano))
	}
	return sqlwire.AppendString(b, fmt.Sprint(v))
}

// appendJSON appends a JSON column's value as the JSON it holds, compacted.
func appendJSON(b []byte, col string, v driver.Value) ([]byte, error) {
	var text []byte
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		text = []byte(v)
	case []byte:
		text = v
	default:
		return nil, abi.Errorf(abi.CodeInvalidArgument, "sql: JSON column %q holds a %T, not text", col, v)
	}
	b, err := sqlwire.AppendJSON(b, col, text)
	if err != nil {
		return nil, err
	}
	return b, nil
}
