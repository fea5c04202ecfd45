package pgcap

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// A call's statements reach the server in as few round trips as their
// dependencies allow: the statements of one round trip go as one
// pipeline of the extended protocol (Parse, Bind, Describe, Execute each)
// closed by one Sync. Inside the transaction the host began, the first
// error makes the server skip the rest up to the Sync and leaves the
// transaction aborted, as a lone statement's error would: so a plugin's
// statement sent after the host's own in one round trip runs only when
// they succeeded, and the host's statements after it run only when it
// did. The statements of one request of the plugin's go in one round
// trip, each in a savepoint of its own (see session.exec).
//
// The savepoint a plugin statement runs in stays open after it (open):
// the host's next statement on the connection releases it, in the same
// round trip. Released at once, the savepoint would be gone before the
// host had read the statement's rows, and a statement the host refuses
// after it ended on the server (over a limit on its rows or bytes) could
// not be undone.

// step is one statement of a round trip.
type step struct {
	sql    string
	values [][]byte
	oids   []uint32
	// prepared, when set, is the named statement of sql (see stmtcache.go).
	prepared string
	// read, when set, reads the statement's rows; it need not read them
	// all.
	read func(rr *pgconn.ResultReader)
	// done, when set, is called with the statement's command tag once it
	// completed, before the next step's rows are read.
	done func(tag pgconn.CommandTag)
	// tag is the statement's command tag, once it completed.
	tag pgconn.CommandTag
}

// hostStep is a statement of the host's without parameters.
func hostStep(sql string) *step { return &step{sql: sql} }

// releaseStmt releases the savepoint of the plugin's last statement.
const releaseStmt = "RELEASE SAVEPOINT " + stmtSavepoint

// roundTrip runs steps in one round trip, after the release of the
// savepoint of the plugin's last statement when it is open. It returns
// the index of the step that failed and its error, or -1 and the error
// when the release or the connection failed, or -1 and nil.
func (s *session) roundTrip(ctx context.Context, steps []*step) (int, error) {
	var b pgconn.Batch
	first := 0
	if s.open {
		b.ExecParams(releaseStmt, nil, nil, nil, nil)
		first = 1
	}
	for _, st := range steps {
		if st.prepared != "" {
			b.ExecPrepared(st.prepared, st.values, nil, nil)
		} else {
			b.ExecParams(st.sql, st.values, st.oids, nil, nil)
		}
	}
	mrr := s.pc.ExecBatch(ctx, &b)
	i, failed := 0, -1
	var err error
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		var st *step
		if i >= first && i-first < len(steps) {
			st = steps[i-first]
			if st.read != nil {
				st.read(rr)
			}
		}
		tag, rerr := rr.Close()
		if rerr != nil {
			failed, err = i, rerr
			break
		}
		if st != nil {
			st.tag = tag
			if st.done != nil {
				st.done(tag)
			}
		}
		i++
	}
	if cerr := mrr.Close(); err == nil && cerr != nil {
		failed, err = i, cerr
	}
	// Released, or the transaction is lost and only a rollback helps.
	s.open = false
	if err == nil {
		return -1, nil
	}
	if failed < first || failed-first >= len(steps) {
		return -1, err
	}
	if st := steps[failed-first]; s.keyRefused(st, err) && s.db.keyRotated(ctx) {
		err, s.rotated = s.db.rotated(), true
	}
	return failed - first, err
}

// keyRefused reports whether err is check_key refusing the host key that
// st, a statement of the host's, passed.
func (s *session) keyRefused(st *step, err error) bool {
	var pe *pgconn.PgError
	return len(st.values) > 0 && len(st.values[0]) > 0 && &st.values[0][0] == &s.db.keyBytes[0] &&
		errors.As(err, &pe) && pe.Code == "42501" && pe.Message == keyRefused
}
