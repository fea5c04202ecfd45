package pgcap

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// session is one export call's (or, joined to a txn.Txn, one run's) use of
// a role's connection and, from the first request on, its transaction.
type session struct {
	db   *database
	role *role
	conn *pgxpool.Conn
	pc   *pgconn.PgConn
	// cache is the connection's prepared plugin statements; learn, the
	// call's statements to add to it at its end (see stmtcache.go).
	cache  *statementCache
	learn  learned
	limits Limits
	// lockWait bounds the time the statements of one call wait for locks
	// other transactions hold; waited is what they waited so far (see
	// busy.go).
	lockWait time.Duration
	waited   time.Duration

	began bool
	// wrote: the plugin's statements have written (the transaction has a
	// transaction id, or a cursor WITH HOLD); hostWrote: the host wrote
	// its rows (Put, Delete).
	wrote, hostWrote bool
	// guarded: it holds a commit guard, which only the host's release
	// passes, from the first write until settle.
	guarded bool
	token   string
	// writes: the catalog rows the connection had written when the
	// transaction began (see checkCatalog).
	writes catalogWrites
	// settledWrites: the same counters, read by settle, when no statement
	// of the plugin's ran since.
	settledWrites *catalogWrites
	// settled: settle released the guard and ran the plugin's deferred
	// triggers; a plugin statement after it arms a new guard first.
	settled bool
	// deadline, when set, is the end of the export call: the host's
	// statements after the plugin's last one end by then.
	deadline time.Time
	// failed poisons the session after an error that may have lost the
	// transaction or that the call must not survive (time limit,
	// transaction control): later requests repeat it and End rolls back.
	failed error

	abandoned bool
	// rotated: the host key was found rotated in this session (trip.go):
	// its failure is the host's fault.
	rotated bool
	// open: the savepoint of the plugin's last statement is still open;
	// the host's next statement releases it (see trip.go).
	open bool
	// used: a statement of the plugin's ran on the connection, whose
	// session state End resets.
	used bool

	calls txn.Calls // of the txn.Txn the session joined (join.go)
	ended bool
}

const stmtSavepoint = "wasmhist_stmt"

// Request implements capability.Requester: it serves one request of the
// export call.
func (s *session) Request(ctx context.Context, request []byte) ([]byte, error) {
	if s.failed != nil {
		return nil, s.failed
	}
	if err := s.limits.CheckRequest(len(request)); err != nil {
		return nil, err
	}
	stmts, err := decodeRequest(request)
	if err != nil {
		return nil, err
	}
	if err := s.limits.CheckStatements(len(stmts)); err != nil {
		return nil, err
	}
	// The request's clock, like the call's, stands still while a
	// statement waits for another transaction's lock (see busy.go).
	call := ctx
	ctx, cancel := capability.WithClock(ctx, s.limits.Timeout)
	defer cancel()
	out := newResultWriter(s.limits)
	// The plugin's rows only: the host's own reads on the connection (the
	// session and journal rows, which hold a whole session) keep pgx's
	// bound.
	s.pc.Frontend().SetMaxBodyLen(maxMessage(s.limits))
	defer s.pc.Frontend().SetMaxBodyLen(pgxMaxMessage)
	i, err := s.exec(ctx, call, stmts, out)
	for errors.Is(err, errStale) {
		// Statement i's cached form was stale, and is forgotten: it runs
		// again, unnamed, with the statements after it.
		var j int
		j, err = s.exec(ctx, call, stmts[i:], out)
		i += j
	}
	if err != nil {
		if ae, ok := err.(*abi.Error); ok && s.rotated {
			// The host's fault, whatever the plugin makes of it.
			err = s.db.rotatedRequest(ae)
			if s.failed != nil {
				s.failed = err
			}
		}
		if len(stmts) > 1 {
			if hf := (*capability.HostFault)(nil); errors.As(err, &hf) {
				hf.Plugin = sqlwire.InStatement(hf.Plugin, i)
			} else {
				err = sqlwire.InStatement(err.(*abi.Error), i)
			}
			if s.failed != nil {
				s.failed = err
			}
		}
		return nil, err
	}
	return out.finish(), nil
}

// begin starts the transaction with the request limit and the lock wait
// (plus a second, for the host's cancel to come first) as its server-side
// statement timeout, in case the host is gone; the plugin may change it
// for its own statements, never for the host's commit (see settle). The
// first statement of a transaction sends the same in its round trip
// (beginSteps); begin alone runs when that round trip's gate failed, to
// say why.
func (s *session) begin(ctx context.Context) error {
	if err := s.beginTracked(ctx, "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL statement_timeout = "+pgMillis(s.limits.Timeout+s.lockWait+time.Second)); err != nil {
		return err
	}
	s.began, s.wrote, s.hostWrote, s.guarded, s.settled = true, false, false, false, false
	return nil
}

// beginRead is what begin's steps read.
type beginRead struct {
	writes catalogWrites
	err    error
}

// beginSteps are begin's statements and beginTracked's reads, sent in
// front of the first statement of the transaction, in its round trip:
// BEGIN and the host schema's begin_checks, one statement that sets
// begin's server-side limit, reads the catalog counters and is the gate
// that fails, so that nothing after it runs, when beginTracked would
// refuse the call (see beginOutcome): when the server does not keep the
// catalog counters or the role may open connections out of the run. It
// is a function because the server keeps a function's plans across
// transactions, where it plans the same queries sent as statements again
// each time, and one because each statement costs the server its own
// parse, bind and execute.
func (s *session) beginSteps() ([]*step, *beginRead) {
	b := &beginRead{}
	checks := &step{
		sql:    s.db.sql.checks,
		values: [][]byte{millis(s.limits.Timeout + s.lockWait + time.Second)},
		oids:   []uint32{oidText},
		read:   func(rr *pgconn.ResultReader) { b.writes, b.err = streamCatalogWrites(rr) },
	}
	return []*step{hostStep("BEGIN ISOLATION LEVEL READ COMMITTED"), checks}, b
}

// beginOutcome records the outcome of a round trip in front of which
// beginSteps ran, of which failed (-1 for none) failed with err. It
// returns redo when the transaction is begun after all, by begin alone,
// and the caller runs its statements again; else err when it failed.
func (s *session) beginOutcome(ctx context.Context, steps []*step, b *beginRead, failed int, err error) (redo bool, _ error) {
	if err == nil || failed != 0 {
		// BEGIN ran.
		s.began, s.wrote, s.hostWrote, s.guarded, s.settled = true, false, false, false, false
	}
	if err != nil && failed < len(steps) {
		// begin's part failed: nothing after it ran.
		if s.began && !s.pc.IsClosed() {
			s.host(ctx, "ROLLBACK")
			s.began = false
		}
		if failed != len(steps)-1 {
			return false, err
		}
		// The gate: begin alone says why (and ends the transaction), or
		// finds nothing to refuse any more.
		if berr := s.begin(ctx); berr != nil {
			return false, berr
		}
		return true, nil
	}
	if b.err != nil {
		return false, b.err
	}
	s.writes = b.writes
	return false, nil
}

func pgMillis(d time.Duration) string { return "'" + string(millis(d)) + "'" }

// millis is d as a setting's value in milliseconds, at least 1.
func millis(d time.Duration) []byte {
	return append(strconv.AppendInt(nil, max(d.Milliseconds(), 1), 10), "ms"...)
}

// host runs statements of the host's own (no parameters) on the
// connection. Every object they name is schema-qualified (pg_catalog or
// the host schema): they run under the search_path the plugin set.
// The savepoint of the plugin's last statement, when open, is released
// first, in the same round trip, unless q rolls back.
func (s *session) host(ctx context.Context, q string) error {
	if s.open && !strings.HasPrefix(q, "ROLLBACK") {
		q = releaseStmt + "; " + q
	}
	s.open = false
	_, err := s.pc.Exec(ctx, q).ReadAll()
	return err
}

// poison records err as the session's failure and returns it.
func (s *session) poison(err *abi.Error) *abi.Error {
	if s.failed == nil {
		s.failed = err
	}
	return err
}

// transactionTags are the command tags of transaction control. A plugin's
// statement with one of them fails its call: the host owns the transaction.
var transactionTags = map[string]bool{
	"BEGIN": true, "START TRANSACTION": true, "COMMIT": true, "ROLLBACK": true,
	"SAVEPOINT": true, "RELEASE": true, "PREPARE TRANSACTION": true,
	"COMMIT PREPARED": true, "ROLLBACK PREPARED": true,
}

var errTransactionControl = abi.Errorf(abi.CodePermissionDenied,
	"sql: transaction control is not allowed: each export call runs in one transaction the host commits")

// exec runs the statements of one request of the plugin, each inside a
// savepoint of its own, so that a failing statement undoes only itself
// (PostgreSQL otherwise aborts the whole transaction), as on SQLite. ctx
// is the request's, call the call's context: both clocks stand still
// while a statement waits for a lock. On failure it returns the index of
// the statement that failed.
//
// It makes one round trip (see trip.go): the release of the previous
// statement's savepoint; for the call's first statement, begin's
// statements; a new commit guard, when the guard was released and the
// transaction has written; then for each statement its savepoint (nested
// in the one before, each named apart: stmtSavepointName), the statement
// and, until the transaction has written, a commit guard armed only if it
// has, so that a transaction that writes holds the guard before the
// plugin's next statement can try to commit it. The checks of one round
// trip share a token, whose row the guard function inserts once.
//
// The server skips everything after a failing statement up to the round
// trip's end, so the request stops at its first failure, as on SQLite;
// a statement the host refuses after it ended (over a limit on rows or
// bytes) is undone with every statement after it, which ran in its
// savepoint. A statement after one that ended the transaction cannot run:
// its savepoint fails outside a transaction block.
func (s *session) exec(ctx, call context.Context, stmts []statement, out *resultWriter) (int, error) {
	var (
		steps  []*step
		begin  *beginRead
		nbegin int
	)
	if !s.began {
		s.wrote, s.hostWrote, s.guarded, s.settled = false, false, false, false
		steps, begin = s.beginSteps()
		nbegin = len(steps)
	}
	var guard *guarding
	guardAt := -1
	if s.settled {
		// The guard was released: a statement of the plugin's after that
		// must not be able to COMMIT the transaction's writes.
		s.settled = false
		if s.wrote {
			guard, guardAt = s.guardStep(false, newGuardToken()), len(steps)
			steps = append(steps, &guard.step)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// werr is the host's refusal of statement werrAt's rows; the rows of
	// the statements after it are not read.
	var werr *abi.Error
	werrAt := -1
	type planned struct {
		save, at int // the indexes of its savepoint and of the statement
		plugin   *step
		check    *guarding
		cached   *cachedStatement
		// read: the statement's rows began to arrive.
		read bool
	}
	plan := make([]planned, len(stmts))
	var token string
	if !s.wrote {
		token = newGuardToken()
	}
	for k, st := range stmts {
		p := &plan[k]
		p.save = len(steps)
		steps = append(steps, hostStep("SAVEPOINT "+stmtSavepointName(k)))
		p.at = len(steps)
		p.plugin = &step{sql: st.sql, values: st.values, oids: st.oids,
			read: func(rr *pgconn.ResultReader) {
				p.read = true
				if werr == nil {
					if werr = out.statement(rr, st.json, cancel); werr != nil {
						werrAt = k
					}
				}
			},
			done: func(tag pgconn.CommandTag) {
				if werr == nil {
					out.counts(tag)
				}
			},
		}
		if p.cached = s.cache.lookup(st.sql, st.oids); p.cached != nil {
			p.plugin.prepared = p.cached.name
		}
		steps = append(steps, p.plugin)
		if !s.wrote {
			p.check = s.guardStep(true, token)
			steps = append(steps, &p.check.step)
		}
	}
	s.used, s.settledWrites = true, nil
	endWatch := s.watchLocks(cancel, ctx, call)
	failed, err := s.roundTrip(sctx, steps)
	busy := endWatch()
	if nbegin > 0 && (err == nil || failed != 0) {
		s.began = true // for the cases below that end it
	}
	// at is the index of the statement the round trip stopped at, for the
	// errors below that concern the whole round trip.
	at := len(stmts) - 1
	for k := range plan {
		if (err != nil && failed <= plan[k].at) || werrAt == k {
			at = k
			break
		}
	}
	if s.pc.IsClosed() {
		s.began = false
		s.abandon(ctx)
		if busy {
			s.failed = s.busyFault()
			return at, s.failed
		}
		var big *pgproto3.ExceededMaxBodyLenErr
		if isTimeout(ctx, err) || errors.As(err, &big) {
			// The statement went on past its cancel: the host gave up;
			// or the host ended it at a row past maxMessage.
			return at, s.poison(s.mapError(ctx, err))
		}
		return at, s.poison(abi.Errorf(abi.CodeUnavailable, "sql: the connection was lost: %v", errOr(err, ctx.Err())))
	}
	if nbegin > 0 {
		redo, berr := s.beginOutcome(ctx, steps[:nbegin], begin, failed, err)
		if redo {
			return s.exec(ctx, call, stmts, out)
		}
		if berr != nil {
			return 0, s.poison(s.mapError(ctx, berr))
		}
	}
	if guard != nil && (err == nil || failed > guardAt) {
		s.guarded, s.token = true, guard.token
	}
	status := s.pc.TxStatus()
	for k := range plan {
		p := &plan[k]
		if err != nil && failed < p.at {
			if k > 0 && status == 'I' {
				// The statement before ended the transaction without
				// saying so in its tag: its savepoint failed.
				s.began = false
				return k - 1, s.poison(errTransactionControl)
			}
			// The new guard or the savepoint failed.
			return k, s.poison(s.mapError(ctx, err))
		}
		if werrAt == k || (err != nil && failed == p.at) {
			if status == 'I' {
				// The statement, or one after it, ended the
				// transaction: the plugin's COMMIT failed by the commit
				// guard, say.
				s.began = false
				return k, s.poison(errTransactionControl)
			}
			if p.cached != nil && !p.read && werr == nil && !busy && staleStatement(err) {
				// It failed before it ran: binding the named statement.
				s.cache.forget(p.cached)
				if s.undo(ctx, k, false, nil, err); s.failed != nil {
					return k, s.failed
				}
				return k, errStale
			}
			return k, s.undo(ctx, k, busy, werr, err)
		}
		if tag := p.plugin.tag.String(); transactionTags[tag] {
			if status == 'I' {
				// The plugin's COMMIT (failed by the commit guard if it
				// had written) or ROLLBACK ended the transaction.
				s.began = false
			}
			if tag == "PREPARE TRANSACTION" {
				s.rollbackPrepared(ctx)
			}
			return k, s.poison(errTransactionControl)
		}
		if err != nil && (k == len(plan)-1 || failed < plan[k+1].save) {
			// The host's statement after the plugin's failed.
			return k, s.poison(s.mapError(ctx, err))
		}
		if p.check != nil && p.check.armed {
			s.wrote, s.guarded, s.token = true, true, token
		}
		if p.cached == nil {
			s.learn.note(s.cache, &stmts[k], p.plugin.tag)
		}
	}
	if status == 'I' {
		s.began = false
		return len(plan) - 1, s.poison(errTransactionControl)
	}
	s.open = true
	return 0, nil
}

// rollbackPrepared rolls back the transactions the plugin's role has
// prepared, where the server allows that (max_prepared_transactions): a
// call that wrote cannot prepare one past the commit guard, but one that
// did not (locks, advisory locks) can, and it would hold them, and hold
// back the server's cleanup, until someone rolls it back.
func (s *session) rollbackPrepared(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hostLimit)
	defer cancel()
	res, err := s.pc.Exec(rctx, `SELECT pg_catalog.quote_literal(p.gid) FROM pg_catalog.pg_prepared_xacts p
		WHERE p.owner OPERATOR(pg_catalog.=) session_user AND p.database OPERATOR(pg_catalog.=) pg_catalog.current_database()`).ReadAll()
	if err != nil || len(res) != 1 {
		return
	}
	for _, row := range res[0].Rows {
		s.pc.Exec(rctx, "ROLLBACK PREPARED "+string(row[0])).ReadAll()
	}
}

// undo rolls back statement k of a round trip, and what ran after it in its
// savepoint, with a context of its own (the request's may be what ended
// it), and returns the statement's error: werr, the host's refusal of its
// rows, or err, the server's. The savepoints of the statements before it
// stay open.
func (s *session) undo(ctx context.Context, k int, busy bool, werr *abi.Error, err error) error {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), hostLimit)
	defer rcancel()
	s.open = false
	name := stmtSavepointName(k)
	if rerr := s.host(rctx, "ROLLBACK TO SAVEPOINT "+name+"; RELEASE SAVEPOINT "+name); rerr != nil {
		s.poison(abi.Errorf(abi.CodeUnavailable, "sql: the transaction was lost: %v", rerr))
	}
	s.open = k > 0
	if busy {
		// As on SQLite, the call fails with the host's error: nothing the
		// plugin asked for in it commits.
		s.failed = s.busyFault()
		return s.failed
	}
	if werr != nil {
		return werr
	}
	ae := s.mapError(ctx, err)
	if ae.Code == abi.CodeResourceExhausted && isTimeout(ctx, err) {
		// As on SQLite: a call whose statement ran out of time fails even
		// if the plugin goes on.
		return s.poison(ae)
	}
	return ae
}

// stmtSavepointName is the savepoint of the k-th statement of a round
// trip: the first is stmtSavepoint, which releaseStmt releases with every
// savepoint nested in it.
func stmtSavepointName(k int) string {
	if k == 0 {
		return stmtSavepoint
	}
	return stmtSavepoint + "_" + strconv.Itoa(k)
}

// abandon makes sure the server stops the work of a connection the host
// gave up on (a statement that went on past its cancel, most often by
// catching it): pgx keeps a timed-out connection's socket open while it
// drains it, for up to 15 s, so the host closes the socket itself, which
// the server's connection check (client_connection_check_interval) sees,
// and asks the server to end the backend, which no plugin code can catch
// or turn off. The second needs an admin with the right to signal the
// role's backends (a superuser, or pg_signal_backend); without it the
// connection check alone ends the backend.
func (s *session) abandon(ctx context.Context) {
	if s.abandoned {
		return
	}
	s.abandoned = true
	pid := s.pc.PID()
	s.pc.Conn().Close()
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hostLimit)
	defer cancel()
	s.db.admin.Exec(tctx, `SELECT pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a
		WHERE a.pid OPERATOR(pg_catalog.=) $1 AND a.usename OPERATOR(pg_catalog.=) $2`, pid, s.role.name)
}

// hostCause is the host's error behind err, if the host failed the call
// (capability.HostFault), else err.
func hostCause(err error) error {
	if hf := (*capability.HostFault)(nil); errors.As(err, &hf) {
		return hf.Cause
	}
	return err
}

func errOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// guarding is a statement that inserts a commit guard, with a new token,
// into the transaction.
type guarding struct {
	step
	token string
	armed bool // it inserted the guard
}

// newGuardToken is a new random commit guard token.
func newGuardToken() string {
	var t [16]byte
	rand.Read(t[:])
	return hex.EncodeToString(t[:])
}

// guardStep is a guarding step with token; when onlyIfWrote, it inserts the guard
// only if the transaction has written (has a transaction id).
func (s *session) guardStep(onlyIfWrote bool, token string) *guarding {
	g := &guarding{token: token}
	h := sha256.Sum256([]byte(g.token))
	g.sql = s.db.sql.guard
	if onlyIfWrote {
		g.sql = s.db.sql.guardIfWrote
	}
	g.values = [][]byte{s.db.keyBytes, []byte(`\x` + hex.EncodeToString(h[:]))}
	g.oids = []uint32{oidText, oidBytea}
	g.read = func(rr *pgconn.ResultReader) {
		for rr.NextRow() {
			// guard returns no value; guard_if_wrote whether it armed.
			if v := rr.Values(); !onlyIfWrote || (len(v) == 1 && string(v[0]) == "t") {
				g.armed = true
			}
		}
	}
	return g
}

// settle ends the plugin's part of a transaction that wrote, before the
// host writes its own rows or commits: it releases the guard and runs the
// plugin's deferred triggers until none is left (the host schema's
// settle_deferred: a trigger may defer others again, which would otherwise
// run in the COMMIT, after the host's checks), within the request limit
// and what is left of the call, under a statement timeout set by the
// host's own statement just before, so that the plugin's COMMIT never
// passes the guard. The host's statements after them (its rows, the
// catalog counters, and checkCatalog's) run within hostLimit, set again
// after the triggers, whatever they set (on the client, the round trip as
// a whole ends within the request limit: its reply comes at its end). It
// keeps the guard's trigger deferred, for a guard armed again by a later
// statement of the plugin.
//
// then are the host's statements that follow, sent in the same round
// trip (with nothing to settle, in one of their own, within ctx); their
// failure is thenErr, settle's own err.
func (s *session) settle(ctx context.Context, then ...*step) (thenErr, err error) {
	if s.settled || !s.wrote {
		if len(then) == 0 {
			return nil, nil
		}
		_, err := s.roundTrip(ctx, then)
		return err, nil
	}
	ctx, cancel := s.bounded(ctx, s.limits.Timeout)
	defer cancel()
	h := sha256.Sum256([]byte(s.token))
	// The guard released and the plugin's limits set in one statement;
	// then the triggers, after which settle_deferred sets the host's limit
	// for the statements after it, the host's, whatever the plugin's
	// triggers set, and defers the guard's trigger again.
	steps := []*step{
		{
			sql: s.db.sql.release + ", pg_catalog.set_config('statement_timeout', " + pgMillis(s.limits.Timeout) +
				", true), pg_catalog.set_config('client_connection_check_interval', " + pgMillis(checkInterval) + ", true)",
			values: [][]byte{s.db.keyBytes, []byte(`\x` + hex.EncodeToString(h[:]))},
			oids:   []uint32{oidText, oidBytea},
		},
		{
			// No host key: the plugin's triggers run in this statement,
			// and code can read the parameters of the statement it runs
			// in (settle_deferred).
			sql:    s.db.sql.fire,
			values: [][]byte{millis(hostLimit)},
			oids:   []uint32{oidText},
		},
	}
	n := len(steps)
	// The catalog counters commit compares (checkCatalog), after the
	// plugin's deferred triggers and the host's statements.
	var writes *catalogWrites
	var werr error
	counters := hostStep(s.db.sql.writes)
	counters.read = func(rr *pgconn.ResultReader) {
		w, err := streamCatalogWrites(rr)
		writes, werr = &w, err
	}
	failed, err := s.roundTrip(ctx, append(append(steps, then...), counters))
	if err != nil && failed < n {
		return nil, s.poison(s.commitError(ctx, "run the plugin's deferred triggers", err))
	}
	s.guarded, s.settled = false, true
	if err == nil && werr == nil {
		s.settledWrites = writes
	}
	if err != nil && failed == n+len(then) {
		return nil, s.poison(s.commitError(ctx, "read the catalog counters", err))
	}
	return err, nil
}

// hostLimit bounds a round trip of the host's own statements on a
// plugin connection once the plugin's part of a call has ended: the
// host's rows, the commit's checks, the COMMIT, a rollback, the reset.
// The request limit is the plugin's to choose: a slow server must not
// fail a call at its commit because the plugin's limit is short.
const hostLimit = 5 * time.Second

// bounded is ctx ending within limit and by the call's end.
func (s *session) bounded(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	if s.deadline.IsZero() {
		return ctx, cancel
	}
	ctx, cancel2 := context.WithDeadline(ctx, s.deadline)
	return ctx, func() { cancel2(); cancel() }
}

// hostError is err of a statement of the host's after the plugin's part:
// out of time, it names the host's limit or the call's end, not the
// plugin's request limit.
func (s *session) hostError(ctx context.Context, step string, err error) *abi.Error {
	if !isTimeout(ctx, err) {
		return s.commitError(ctx, step, err)
	}
	if !s.deadline.IsZero() && !time.Now().Before(s.deadline) {
		return abi.Errorf(abi.CodeResourceExhausted, "sql: %s at the end of the call: the call's time ran out", step)
	}
	return abi.Errorf(abi.CodeUnavailable, "sql: %s at the end of the call: the server took longer than the host's limit of %s: check its load and long-held locks", step, hostLimit)
}

// commitError is err of the host's commit step, as the plugin's error it
// is (its deferred trigger's failure, the time limit, the guard).
func (s *session) commitError(ctx context.Context, step string, err error) *abi.Error {
	ae := s.mapError(ctx, err)
	return abi.Errorf(ae.Code, "sql: %s at the end of the call: %s", step, strings.TrimPrefix(ae.Message, "sql: "))
}

func (db *database) qhost() string { return pgx.Identifier{db.hostSchema}.Sanitize() }

// hostSQL are the host's statements on a plugin's connection that name the
// host schema, written once per database.
type hostSQL struct {
	guard, guardIfWrote, release string
	put, getRows, del            string
	checks, writes, fire         string
	// reset resets the session state a plugin's statements may leave on
	// a connection, keeping the server's cached plans and the host's
	// prepared statements (see provisionHost's reset_session). A cached
	// plan depends on nothing the plugin could leave behind: the server
	// plans again when a search_path, object or privilege it used changes.
	reset string
	qs    string // the host schema, quoted
}

// beforeCommit is the host schema's before_commit with timeout, which
// the host sends before its COMMIT.
func (h *hostSQL) beforeCommit(timeout time.Duration) string {
	return `SELECT ` + h.qs + `.before_commit(` + pgMillis(timeout) + `)`
}

func newHostSQL(qs string) hostSQL {
	return hostSQL{
		guard:        `SELECT ` + qs + `.guard($1, $2)`,
		guardIfWrote: `SELECT ` + qs + `.guard_if_wrote($1, $2)`,
		release:      `SELECT ` + qs + `.release($1, $2)`,
		qs:           qs,
		put:          `SELECT ` + qs + `.put_row($1, $2, $3, $4, $5)`,
		getRows:      `SELECT tab, revision, body FROM ` + qs + `.get_rows($1, $2, $3)`,
		del:          `SELECT ` + qs + `.delete_row($1, $2, $3)`,
		checks:       `SELECT * FROM ` + qs + `.begin_checks($1)`,
		fire:         `SELECT ` + qs + `.settle_deferred($1)`,
		writes:       `SELECT * FROM ` + qs + `.catalog_writes()`,
		reset:        `SELECT ` + qs + `.reset_session()`,
	}
}

// End commits when ok and nothing failed, else rolls back, resets the
// connection's session state (a plugin's SET, advisory locks, prepared
// statements) and returns it to the pool. It runs even when the export
// call's context has ended.
func (s *session) End(ctx context.Context, ok bool) error {
	if dl, has := ctx.Deadline(); has && (s.deadline.IsZero() || dl.Before(s.deadline)) {
		s.deadline = dl // the commit step's bound: see bounded
	}
	ctx = context.WithoutCancel(ctx)
	if s.ended {
		return nil
	}
	s.ended = true
	reset := s.used // the plugin's statements leave session state behind
	defer func() {
		s.open = false
		if s.pc.IsClosed() {
			s.abandon(ctx)
		} else if reset {
			rctx, cancel := context.WithTimeout(ctx, hostLimit)
			if s.host(rctx, s.db.sql.reset) != nil {
				s.pc.Close(rctx)
			}
			cancel()
		}
		s.conn.Release()
	}()
	if !s.began {
		if ok && s.failed != nil {
			return fmt.Errorf("pgcap: %s: the call's transaction was rolled back after: %w", s.db.name, hostCause(s.failed))
		}
		return nil
	}
	s.began = false
	if ok && s.failed == nil {
		var err error
		reset, err = s.commit(ctx)
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, hostLimit)
	defer cancel()
	_, err, derr := s.finish(rctx, false, "ROLLBACK")
	reset = derr != nil
	if err != nil {
		return fmt.Errorf("pgcap: %s: roll back: %w", s.db.name, err)
	}
	if ok {
		return fmt.Errorf("pgcap: %s: the call's transaction was rolled back after: %w", s.db.name, hostCause(s.failed))
	}
	return nil
}

// finish ends the transaction with the last of q (COMMIT or ROLLBACK),
// after the others, and, when a statement of the plugin's ran on the
// connection, resets the session state the plugin may have left
// (hostSQL.reset), in one round trip: the reset has a Sync of its own,
// sent with q's, so that it runs even when q fails. It returns the last
// q's command tag, q's error and the reset's error, after which the
// caller closes the connection.
//
// For a call that succeeded (ok), whether it commits or, having written
// nothing, rolls back, it also prepares the statements it learned (see
// stmtcache.go), between the two: analysing a statement can run the
// plugin's code (a domain's CHECK on a cast constant), so they are
// prepared in a read-only transaction of their own, within the request
// limit, which is rolled back, and the reset comes after it. The
// statements the cache forgot are closed with the reset.
func (s *session) finish(ctx context.Context, ok bool, q ...string) (tag pgconn.CommandTag, err, resetErr error) {
	s.open = false
	p := s.pc.StartPipeline(ctx)
	for _, q := range q {
		p.SendQueryParams(q, nil, nil, nil, nil)
	}
	p.SendPipelineSync()
	n, reset := 1, -1 // the parts; the reset's
	var drops []string
	var prepares []*cachedStatement
	if s.used {
		if ok && len(s.learn.stmts) > 0 {
			s.cache.evict(len(s.learn.stmts))
			prepares = s.learn.stmts
			p.SendQueryParams("BEGIN READ ONLY", nil, nil, nil, nil)
			p.SendQueryParams("SET LOCAL statement_timeout = "+pgMillis(s.limits.Timeout), nil, nil, nil, nil)
			for _, e := range prepares {
				p.SendPrepare(e.name, e.sql, e.oids)
			}
			p.SendPipelineSync()
			p.SendQueryParams("ROLLBACK", nil, nil, nil, nil)
			n++
		}
		s.learn.stmts = nil
		drops, s.cache.drop = s.cache.drop, nil
		for _, name := range drops {
			p.SendDeallocate(name)
		}
		p.SendQueryParams(s.db.sql.reset, nil, nil, nil, nil)
		p.SendPipelineSync()
		reset, n = n, n+1
	}
	errs := make([]error, n)
	if ferr := p.Flush(); ferr != nil {
		errs[0] = ferr
	}
	prepared, closed := 0, 0
	for part := 0; part < n; {
		res, rerr := p.GetResults()
		if rerr != nil {
			if errs[part] == nil {
				errs[part] = rerr
			}
			if !isPgError(rerr) {
				break
			}
			continue
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			t, rerr := r.Close()
			if part == 0 {
				tag = t
			}
			if rerr != nil && errs[part] == nil {
				errs[part] = rerr
			}
		case *pgconn.StatementDescription:
			// A statement that no longer parses fails alone, and the
			// ones after it are not prepared; the next call that runs
			// them learns them again.
			s.cache.add(prepares[prepared])
			prepared++
		case *pgconn.CloseComplete:
			closed++
		case *pgconn.PipelineSync:
			part++
		case nil:
			part = n
		}
	}
	if cerr := p.Close(); cerr != nil && !isPgError(cerr) {
		for i := range n {
			if errs[i] == nil {
				errs[i] = cerr
			}
		}
	}
	if closed < len(drops) {
		s.cache.drop = append(s.cache.drop, drops[closed:]...)
	}
	if reset >= 0 {
		resetErr = errs[reset]
	}
	return tag, errs[0], resetErr
}

func isPgError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// commit settles, checks the catalog and commits, within the call's (or,
// joined, the run's) remaining time: the plugin's deferred work within
// its request limit, the host's statements within hostLimit. reset says whether the
// connection's session state is still to be reset (see finish).
func (s *session) commit(ctx context.Context) (reset bool, _ error) {
	if _, err := s.settle(ctx); err != nil {
		s.rollback(ctx)
		return s.used, fmt.Errorf("pgcap: %s: commit: %w", s.db.name, err)
	}
	if s.wrote {
		// After the plugin's deferred triggers, which may grant too.
		cctx, cancel := s.bounded(ctx, hostLimit)
		err := s.checkCatalog(cctx)
		if err != nil && !errors.Is(err, ErrShared) && !errors.Is(err, ErrRoleChanged) {
			err = s.hostError(cctx, "check what the run changed", err)
		}
		cancel()
		if err != nil {
			s.rollback(ctx)
			return s.used, fmt.Errorf("pgcap: %s: commit refused, rolled back: %w", s.db.name, err)
		}
	}
	cctx, cancel := s.bounded(ctx, s.limits.Timeout)
	defer cancel()
	if !s.wrote && !s.hostWrote {
		// Nothing to commit: the host wrote no row, no statement took a transaction id (every
		// write does) and no cursor WITH HOLD is open (either arms the
		// guard, see session.exec). A ROLLBACK ends the transaction in
		// one statement where the COMMIT below takes four, and runs
		// nothing of the plugin's: no trigger was queued, and a NOTIFY
		// alone goes with it (SPEC: a notification is sent by a call that
		// writes).
		_, err, resetErr := s.finish(cctx, true, "ROLLBACK")
		if err != nil {
			return resetErr != nil, fmt.Errorf("pgcap: %s: end a call that wrote nothing: %w", s.db.name, s.commitError(cctx, "end the transaction", err))
		}
		return resetErr != nil, nil
	}
	// A cursor WITH HOLD has its query run to its end by the COMMIT: the
	// cursors are closed first (before_commit). settle left no trigger of
	// the plugin's to run. Read-only is a second line (on PostgreSQL 15 a
	// RESET turns it off); set in a savepoint it would end with it, so the
	// plugin's last one is released first.
	end := []string{s.db.sql.beforeCommit(s.limits.Timeout), "COMMIT"}
	if s.open {
		end = append([]string{releaseStmt}, end...)
	}
	tag, err, resetErr := s.finish(cctx, true, end...)
	if err == nil && tag.String() != "COMMIT" {
		err = errors.New("the server rolled the transaction back")
	}
	if err != nil {
		return resetErr != nil, fmt.Errorf("pgcap: %s: commit: %w", s.db.name, s.commitError(cctx, "commit", err))
	}
	return resetErr != nil, nil
}

// rollback ends a transaction whose commit step failed (the server may
// have ended it already), with a context of its own.
func (s *session) rollback(ctx context.Context) {
	if s.pc.IsClosed() {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hostLimit)
	defer cancel()
	s.host(rctx, "ROLLBACK")
}

func isTimeout(ctx context.Context, err error) bool {
	var pe *pgconn.PgError
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &pe) && pe.Code == "57014")
}

// mapError turns a PostgreSQL error into what the plugin sees.
func (s *session) mapError(ctx context.Context, err error) *abi.Error {
	var ae *abi.Error
	if errors.As(err, &ae) {
		return ae
	}
	if isTimeout(ctx, err) {
		return abi.Errorf(abi.CodeResourceExhausted, "sql: request exceeded its time limit of %s and was cancelled", s.limits.Timeout)
	}
	var big *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &big) {
		return abi.Errorf(abi.CodeResourceExhausted, "sql: a row of %d bytes exceeds the result limit of %d bytes, and ended the connection: the call's statements are undone; select less per row", big.ActualBodyLen, s.limits.MaxResultBytes)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return abi.Errorf(abi.CodeUnavailable, "sql: %v", err)
	}
	msg := "sql: " + pe.Message
	if pe.Detail != "" {
		msg += " (" + pe.Detail + ")"
	}
	code := pe.Code
	switch {
	case code == "42501" || strings.HasPrefix(code, "28"):
		return abi.Errorf(abi.CodePermissionDenied, "%s", msg)
	case strings.HasPrefix(code, "23"):
		return abi.Errorf(abi.CodeFailedPrecondition, "%s", msg)
	case strings.HasPrefix(code, "53") || strings.HasPrefix(code, "54"):
		return abi.Errorf(abi.CodeResourceExhausted, "%s", msg)
	case strings.HasPrefix(code, "40") || code == "55P03" || strings.HasPrefix(code, "57") || strings.HasPrefix(code, "08"):
		return abi.Errorf(abi.CodeUnavailable, "%s", msg)
	case strings.HasPrefix(code, "P0"):
		return abi.Errorf(abi.CodeFailedPrecondition, "%s", msg)
	case strings.HasPrefix(code, "42") || strings.HasPrefix(code, "22") || strings.HasPrefix(code, "0A") ||
		strings.HasPrefix(code, "25") || strings.HasPrefix(code, "2B") || strings.HasPrefix(code, "21") ||
		strings.HasPrefix(code, "26") || strings.HasPrefix(code, "34") || strings.HasPrefix(code, "3F") ||
		strings.HasPrefix(code, "44") || strings.HasPrefix(code, "38") || strings.HasPrefix(code, "39") ||
		strings.HasPrefix(code, "2F") || strings.HasPrefix(code, "55") || strings.HasPrefix(code, "2D"):
		return abi.Errorf(abi.CodeInvalidArgument, "%s", msg)
	}
	return abi.Errorf(abi.CodeInternal, "%s", msg)
}
