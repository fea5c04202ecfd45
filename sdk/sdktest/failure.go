package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The failure cases: how a provider behaves when things fail around it.
// They matter to plugins that keep data outside their state (the sql
// capability), whose writes the host keeps or rolls back with the run
// that made them (SPEC section 8.2, Transactions); for a plugin that keeps
// everything in its state they pass as the host discards a failed run's
// state. They run only on a RunSubject, and are skipped otherwise.

// Reasons of the failure cases.
const (
	// rolled_back_run_leaves_nothing: after a run was rolled back, provide
	// still returns what the run stored (a provider that commits itself,
	// or that caches rows across calls).
	ReasonRolledBackKept Reason = "rolled_back_run_kept"
	// retried_run_stores_once: a run rolled back or interrupted by its
	// deadline and then retried left its messages more than once, or not
	// at all.
	ReasonRetryDuplicated Reason = "retry_not_stored_once"
	// readable_after_crashed_instance: after an instance crashed in a
	// store (killed by its deadline mid-call), the next instance misses
	// history stored before the crash (a provider that keeps it only in
	// the instance).
	ReasonCrashLost Reason = "history_lost_after_crash"
	// readable_after_crashed_instance: part of what the crashed store
	// wrote is visible afterwards (a provider that writes some of a call's
	// rows outside the run's transaction).
	ReasonCrashHalfWritten Reason = "crashed_store_half_visible"
)

// SkipNoRuns is the Skipped.Why of a failure case on a subject that is not
// a RunSubject.
const SkipNoRuns = "the subject cannot group calls in a run (sdktest.RunSubject)"

// RunSubject is a Subject whose calls can be grouped in a run, as an agent
// run groups them: the external work of the calls made with the context f
// gets (a database's rows) is kept when InRun commits and undone when it
// rolls back. InRun commits when commit is true and f returns nil, and
// rolls back otherwise; it returns f's error, or the commit's.
//
// A host-backed subject implements it with the host's transactions
// (host.InRun): `wasmhist conformance` does, and so can a plugin's test.
type RunSubject interface {
	Subject
	InRun(ctx context.Context, commit bool, f func(ctx context.Context) error) error
}

// runSubject is the subject as a RunSubject, or skips the case.
func runSubject(ctx context.Context, f Factory) (RunSubject, error) {
	s, err := newSubject(ctx, f)
	if err != nil {
		return nil, err
	}
	r, ok := s.(RunSubject)
	if !ok {
		return nil, skip(SkipNoRuns)
	}
	return r, nil
}

func caseRolledBack(ctx context.Context, f Factory) error {
	s, err := runSubject(ctx, f)
	if err != nil {
		return err
	}
	turns := script("rollback", 2)
	sl := newSlot(s, newSessionID(), "history")
	if err := sl.store(ctx, s, turns[0]); err != nil {
		return err
	}
	before := sl.state
	// The run stores, reads its own write, then fails: the host rolls
	// back its writes and keeps the session, so the state before it.
	errRun := errors.New("the run failed after store")
	err = s.InRun(ctx, true, func(ctx context.Context) error {
		inRun := &slot{facts: sl.facts, state: before}
		if err := inRun.store(ctx, s, turns[1]); err != nil {
			return err
		}
		history, err := inRun.provide(ctx, s)
		if err != nil {
			return err
		}
		if err := sameMessages(history, stored(turns)); err != nil {
			return fmt.Errorf("provide within the run, after its store: %w", err)
		}
		return errRun
	})
	if !errors.Is(err, errRun) {
		return fmt.Errorf("the run: %w", err)
	}
	sl.state = before
	for _, on := range []string{"the instance that ran it", "a new instance"} {
		if on == "a new instance" {
			if s, err = runSubject(ctx, f); err != nil {
				return err
			}
		}
		history, err := sl.provide(ctx, s)
		if err != nil {
			return fmt.Errorf("after the rolled-back run, on %s: %w", on, err)
		}
		if err := sameMessages(history, stored(turns[:1])); err != nil {
			return because(ReasonRolledBackKept, fmt.Errorf("provide after a rolled-back run, on %s: %w", on, err))
		}
	}
	return nil
}

func caseRetried(ctx context.Context, f Factory) error {
	s, err := runSubject(ctx, f)
	if err != nil {
		return err
	}
	turns := script("retry", 3)
	sl := newSlot(s, newSessionID(), "history")
	if err := sl.store(ctx, s, turns[0]); err != nil {
		return err
	}
	// A run stores, fails and is rolled back; the retry stores the same
	// turn and commits.
	before := sl.state
	_ = s.InRun(ctx, false, func(ctx context.Context) error {
		return (&slot{facts: sl.facts, state: before}).store(ctx, s, turns[1])
	})
	if err := s.InRun(ctx, true, func(ctx context.Context) error { return sl.store(ctx, s, turns[1]) }); err != nil {
		return fmt.Errorf("the retried run: %w", err)
	}
	// A store that its deadline may interrupt at any point, retried until
	// one attempt succeeds; the run then commits.
	before = sl.state
	err = s.InRun(ctx, true, func(ctx context.Context) error {
		for wait := time.Microsecond; ; wait *= 4 {
			attempt := &slot{facts: sl.facts, state: before}
			tctx, cancel := context.WithTimeout(ctx, wait)
			err := attempt.store(tctx, s, turns[2])
			cancel()
			if err == nil {
				sl.state = attempt.state
				return nil
			}
			if ctx.Err() != nil || wait > time.Minute {
				return err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("the run with an interrupted store: %w", err)
	}
	history, err := sl.provide(ctx, s)
	if err != nil {
		return err
	}
	if err := sameMessages(history, stored(turns)); err != nil {
		return because(ReasonRetryDuplicated, fmt.Errorf("provide after retried runs: %w", err))
	}
	return nil
}

func caseTwoInstances(ctx context.Context, f Factory) error {
	var subjects [2]RunSubject
	for i := range subjects {
		var err error
		if subjects[i], err = runSubject(ctx, f); err != nil {
			return err
		}
	}
	// Two keys, each stored alternately by the two instances, the keys
	// at once: key k's step i runs on instance (i+k)%2.
	turns := [2][]turn{script("alternate-a", 4), script("alternate-b", 4)}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for k := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sl := newSlot(subjects[0], newSessionID(), "history")
			for i, t := range turns[k] {
				s := subjects[(i+k)%2]
				err := s.InRun(ctx, true, func(ctx context.Context) error { return sl.store(ctx, s, t) })
				if err != nil {
					errs[k] = fmt.Errorf("key %c, turn %d on instance %d: %w", 'a'+k, i, (i+k)%2, err)
					return
				}
				other := subjects[(i+k+1)%2]
				history, err := sl.provide(ctx, other)
				if err != nil {
					errs[k] = fmt.Errorf("key %c, provide after turn %d on instance %d: %w", 'a'+k, i, (i+k+1)%2, err)
					return
				}
				if err := sameMessages(history, stored(turns[k][:i+1])); err != nil {
					errs[k] = because(ReasonInstanceDependent, fmt.Errorf("key %c, provide on instance %d after turn %d stored on instance %d: %w", 'a'+k, (i+k+1)%2, i, (i+k)%2, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// caseCrashed kills stores by their deadline, from 1 µs doubling until one
// completes: each attempt that the deadline stopped crashed its instance
// at some point of the call (a host discards an instance its deadline
// interrupted), before or during its writes. After each, the history is
// what was stored before it: within the run, which goes on and commits,
// and on a new instance after that commit.
func caseCrashed(ctx context.Context, f Factory) error {
	s, err := runSubject(ctx, f)
	if err != nil {
		return err
	}
	turns := script("crash", 3)
	sl := newSlot(s, newSessionID(), "history")
	if err := s.InRun(ctx, true, func(ctx context.Context) error { return sl.store(ctx, s, turns[0]) }); err != nil {
		return fmt.Errorf("the first run: %w", err)
	}
	for wait := time.Microsecond; ; wait *= 2 {
		before := sl.state
		attempt := &slot{facts: sl.facts, state: before}
		crashed := false
		err := s.InRun(ctx, true, func(ctx context.Context) error {
			tctx, cancel := context.WithTimeout(ctx, wait)
			deadline, _ := tctx.Deadline()
			err := attempt.store(tctx, s, turns[1])
			cancel()
			if err == nil || time.Now().Before(deadline) || ctx.Err() != nil {
				return err // stored, or failed by itself
			}
			crashed = true
			history, err := (&slot{facts: sl.facts, state: before}).provide(ctx, s)
			if err != nil {
				return fmt.Errorf("after the crash, in the same run: %w", err)
			}
			return afterCrash(history, stored(turns[:1]), "provide in the run, on the instance after the crashed one")
		})
		if err != nil {
			return fmt.Errorf("a run whose store had a deadline of %v: %w", wait, err)
		}
		if !crashed {
			sl.state = attempt.state
			break
		}
		if wait > time.Minute {
			return fmt.Errorf("no store finished within a deadline of %v", wait)
		}
		next, err := runSubject(ctx, f)
		if err != nil {
			return err
		}
		history, err := sl.provide(ctx, next)
		if err != nil {
			return fmt.Errorf("after a store crashed at a deadline of %v and its run committed: %w", wait, err)
		}
		if err := afterCrash(history, stored(turns[:1]), fmt.Sprintf("provide on a new instance after a store crashed at a deadline of %v and its run committed", wait)); err != nil {
			return err
		}
	}
	// The key goes on as if nothing had crashed, on a new instance.
	next, err := runSubject(ctx, f)
	if err != nil {
		return err
	}
	if err := next.InRun(ctx, true, func(ctx context.Context) error { return sl.store(ctx, next, turns[2]) }); err != nil {
		return fmt.Errorf("the run after the crashes: %w", err)
	}
	history, err := sl.provide(ctx, next)
	if err != nil {
		return err
	}
	return afterCrash(history, stored(turns), "provide on a new instance after the crashes and two more runs")
}

// afterCrash checks a history read after a crash: missing messages are
// history lost, any more than want are the crashed call's.
func afterCrash(got, want []json.RawMessage, where string) error {
	err := sameMessages(got, want)
	if err == nil {
		return nil
	}
	if len(got) > len(want) && sameMessages(got[:len(want)], want) == nil {
		return because(ReasonCrashHalfWritten, fmt.Errorf("%s: %w", where, err))
	}
	return because(ReasonCrashLost, fmt.Errorf("%s: %w", where, err))
}
