package pgcap

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// A plugin's statement that waits for a lock another transaction holds (a
// row another process's run of the same session updated, a table being
// altered) waits on the host's time, not the plugin's, as on SQLite: while
// the server reports the statement's backend waiting for a lock
// (pg_locks, a lock not granted), the request's clock and the call's
// stand still (capability.Pause). The server says nothing to the client
// while a statement waits, so the host asks it, from the admin
// connection, once a statement has run for lockPoll and every lockPoll
// after that while it runs. The waits of one call are bounded together by
// Config.LockWait: past it the statement is cancelled and the call fails
// with txn.ErrBusy (a capability.HostFault), whatever the plugin makes of
// the error it reads.
const lockPoll = 25 * time.Millisecond

// DefaultLockWait is Config.LockWait's default, SQLite's busy timeout.
const DefaultLockWait = 5 * time.Second

// busyError is a lock another transaction held while the plugin's
// statements waited for it past Config.LockWait.
type busyError struct {
	name string
	wait time.Duration
}

func (e *busyError) Error() string {
	return fmt.Sprintf("pgcap: %s: %v: another transaction held a lock the plugin's statement needed for over %s: run again; if it recurs, look for long transactions (pg_stat_activity)", e.name, txn.ErrBusy, e.wait)
}

func (e *busyError) Unwrap() error { return txn.ErrBusy }

// busyFault is what a request that ran out of lock wait returns: the
// plugin reads that the database is busy, the call fails with busyError.
func (s *session) busyFault() error {
	return &capability.HostFault{
		Plugin: abi.Errorf(abi.CodeUnavailable, "sql: the database is busy: another transaction held a lock this statement needed for over %s", s.lockWait),
		Cause:  &busyError{name: s.db.name, wait: s.lockWait},
	}
}

// lockWatch watches one running statement of the plugin's.
type lockWatch struct {
	s      *session
	clocks []context.Context // the request's and the call's
	cancel func()            // cancels the statement
	timer  *time.Timer
	stop   chan struct{}
	done   chan struct{}

	// Written by run only, read after done.
	busy bool
}

// watchLocks starts watching the statement of session s about to run,
// whose context cancel ends. clocks are the contexts whose clocks stand
// still while it waits. end stops the watch and reports whether the
// statement was cancelled for having waited too long.
func (s *session) watchLocks(cancel func(), clocks ...context.Context) (end func() (busy bool)) {
	w := &lockWatch{s: s, clocks: clocks, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	w.timer = time.AfterFunc(lockPoll, w.run)
	return func() bool {
		close(w.stop)
		if w.timer.Stop() {
			return false // never started
		}
		<-w.done
		return w.busy
	}
}

func (w *lockWatch) run() {
	defer close(w.done)
	s := w.s
	pid := s.pc.PID()
	qctx, qcancel := context.WithCancel(context.Background())
	defer qcancel()
	go func() {
		select {
		case <-w.stop:
			qcancel()
		case <-qctx.Done():
		}
	}()
	var (
		resumes []func()
		since   time.Time
	)
	unpause := func(now time.Time) {
		if resumes == nil {
			return
		}
		for _, r := range resumes {
			r()
		}
		resumes = nil
		s.waited += now.Sub(since)
	}
	defer func() { unpause(time.Now()) }()
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		var waiting bool
		err := s.db.admin.QueryRow(qctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l
			WHERE l.pid OPERATOR(pg_catalog.=) $1 AND NOT l.granted)`, pid).Scan(&waiting)
		now := time.Now()
		switch {
		case err != nil:
			// Stopped, or the admin connection failed: the plugin's
			// clocks run, as without the watch.
			unpause(now)
		case waiting && resumes == nil:
			for _, c := range w.clocks {
				resumes = append(resumes, capability.Pause(c))
			}
			since = now
		case !waiting:
			unpause(now)
		}
		if resumes != nil && s.waited+now.Sub(since) > s.lockWait {
			w.busy = true
			w.cancel()
			return
		}
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}
