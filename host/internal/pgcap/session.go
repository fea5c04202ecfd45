package pgcap

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
)

// session is one export call's (or, joined to a txn.Txn, one run's) use of
// a role's connection and, from the first request on, its transaction.
type session struct {
	db     *database
	role   *role
	conn   *pgxpool.Conn
	pc     *pgconn.PgConn
	limits Limits

	began bool
	// guarded: the transaction has written (it has a transaction id) and
	// holds the commit guard, which only the host's COMMIT passes.
	guarded bool
	token   string
	// writes: the catalog rows the connection had written when the
	// transaction began (see checkCatalog).
	writes catalogWrites
	// failed poisons the session after an error that may have lost the
	// transaction or that the call must not survive (time limit,
	// transaction control): later requests repeat it and End rolls back.
	failed error

	joined    bool
	laterCall bool
	savepoint bool
	turn      chan struct{}
	ended     bool
}

const (
	stmtSavepoint = "wasmhist_stmt"
	callSavepoint = "wasmhist_call"
)

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
	ctx, cancel := context.WithTimeout(ctx, s.limits.Timeout)
	defer cancel()
	if !s.began {
		if err := s.begin(ctx); err != nil {
			return nil, s.poison(s.mapError(ctx, err))
		}
	}
	out := newResultWriter(s.limits)
	for i, st := range stmts {
		if err := s.exec(ctx, st, out); err != nil {
			if len(stmts) > 1 {
				err = sqlwire.InStatement(err, i)
				if s.failed != nil {
					s.failed = err
				}
			}
			return nil, err
		}
	}
	return out.finish(), nil
}

func (s *session) begin(ctx context.Context) error {
	if err := s.beginTracked(ctx, "BEGIN ISOLATION LEVEL READ COMMITTED"); err != nil {
		return err
	}
	s.began, s.guarded = true, false
	var t [16]byte
	rand.Read(t[:])
	s.token = hex.EncodeToString(t[:])
	return nil
}

// host runs statements of the host's own (no parameters) on the
// connection.
func (s *session) host(ctx context.Context, q string) error {
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

// exec runs one statement of the plugin inside a savepoint of its own, so
// that a failing statement undoes only itself (PostgreSQL otherwise
// aborts the whole transaction), as on SQLite.
func (s *session) exec(ctx context.Context, st statement, out *resultWriter) *abi.Error {
	if err := s.host(ctx, "SAVEPOINT "+stmtSavepoint); err != nil {
		return s.poison(s.mapError(ctx, err))
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rr := s.pc.ExecParams(sctx, st.sql, st.values, st.oids, nil, nil)
	werr := out.statement(rr, st.json, cancel)
	tag, err := rr.Close()
	if s.pc.IsClosed() {
		s.began = false
		return s.poison(abi.Errorf(abi.CodeUnavailable, "sql: the connection was lost: %v", errOr(err, ctx.Err())))
	}
	status := s.pc.TxStatus()
	if transactionTags[tag.String()] || status == 'I' {
		if status == 'I' {
			// The plugin's COMMIT (failed by the commit guard if it had
			// written) or ROLLBACK ended the transaction.
			s.began = false
		}
		return s.poison(errTransactionControl)
	}
	if werr == nil && err == nil {
		if err := s.release(ctx); err != nil {
			return s.poison(s.mapError(ctx, err))
		}
		out.counts(tag)
		return nil
	}
	// Undo the statement, with a context of its own: the request's may be
	// what ended it.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if rerr := s.host(rctx, "ROLLBACK TO SAVEPOINT "+stmtSavepoint+"; RELEASE SAVEPOINT "+stmtSavepoint); rerr != nil {
		s.poison(abi.Errorf(abi.CodeUnavailable, "sql: the transaction was lost: %v", rerr))
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

func errOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// release ends the statement's savepoint and, until the transaction has
// written, asks whether it has: a transaction that writes takes the commit
// guard before the plugin's next statement can try to commit it.
func (s *session) release(ctx context.Context) error {
	q := "RELEASE SAVEPOINT " + stmtSavepoint
	if !s.guarded {
		q += "; SELECT pg_current_xact_id_if_assigned() IS NOT NULL"
	}
	res, err := s.pc.Exec(ctx, q).ReadAll()
	if err != nil || s.guarded {
		return err
	}
	if len(res) == 2 && len(res[1].Rows) == 1 && string(res[1].Rows[0][0]) == "t" {
		return s.guard(ctx)
	}
	return nil
}

// guard inserts the transaction's commit guard.
func (s *session) guard(ctx context.Context) error {
	if s.guarded {
		return nil
	}
	h := sha256.Sum256([]byte(s.token))
	_, err := s.pc.ExecParams(ctx, `SELECT `+s.db.qhost()+`.guard($1, $2)`,
		[][]byte{[]byte(s.db.key), []byte(`\x` + hex.EncodeToString(h[:]))}, []uint32{oidText, oidBytea}, nil, nil).Close()
	if err != nil {
		return err
	}
	s.guarded = true
	return nil
}

func (db *database) qhost() string { return pgx.Identifier{db.hostSchema}.Sanitize() }

// End commits when ok and nothing failed, else rolls back, resets the
// connection's session state (a plugin's SET, advisory locks, prepared
// statements) and returns it to the pool. It runs even when the export
// call's context has ended.
func (s *session) End(ctx context.Context, ok bool) error {
	ctx = context.WithoutCancel(ctx)
	if s.ended {
		return nil
	}
	s.ended = true
	defer func() {
		if !s.pc.IsClosed() {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if s.host(rctx, "DISCARD ALL") != nil {
				s.pc.Close(rctx)
			}
			cancel()
		}
		s.conn.Release()
	}()
	if !s.began {
		if ok && s.failed != nil {
			return fmt.Errorf("pgcap: %s: the call's transaction was rolled back after: %w", s.db.name, s.failed)
		}
		return nil
	}
	s.began = false
	if ok && s.failed == nil {
		return s.commit(ctx)
	}
	if err := s.host(ctx, "ROLLBACK"); err != nil {
		return fmt.Errorf("pgcap: %s: roll back: %w", s.db.name, err)
	}
	if ok {
		return fmt.Errorf("pgcap: %s: the call's transaction was rolled back after: %w", s.db.name, s.failed)
	}
	return nil
}

func (s *session) commit(ctx context.Context) error {
	if s.guarded {
		if err := s.checkCatalog(ctx); err != nil {
			s.host(ctx, "ROLLBACK")
			return fmt.Errorf("pgcap: %s: commit refused, rolled back: %w", s.db.name, err)
		}
		_, err := s.pc.ExecParams(ctx, `SELECT set_config('wasmhist.commit_token', $1, true)`,
			[][]byte{[]byte(s.token)}, []uint32{oidText}, nil, nil).Close()
		if err != nil {
			s.host(ctx, "ROLLBACK")
			return fmt.Errorf("pgcap: %s: commit: %w", s.db.name, err)
		}
	}
	res, err := s.pc.Exec(ctx, "COMMIT").ReadAll()
	if err == nil && (len(res) != 1 || res[0].CommandTag.String() != "COMMIT") {
		err = errors.New("the server rolled the transaction back")
	}
	if err != nil {
		return fmt.Errorf("pgcap: %s: commit: %w", s.db.name, err)
	}
	return nil
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
