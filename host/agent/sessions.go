package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// StaleAttempts bounds how often Sessions runs a turn that another process
// committed under: each attempt after the first loads the session again.
// Two processes that alternate turns on one session lose at most one
// attempt each to the other; four covers a third writer.
const StaleAttempts = 4

// Sessions runs an agent's turns on the sessions its Saver keeps, by id:
// each turn loads the session (store.LoadOrNew: a new id starts a new
// session), runs, and commits through the Saver, one turn at a time per
// session id in this process. A turn that another process committed under
// fails at commit with session.ErrStaleRevision; when it committed nothing
// (per service call, an earlier call of the turn may have) and nothing of
// it has reached the caller (a streamed turn failed before its first
// update), Sessions loads the session again and runs the turn again, up to
// StaleAttempts times. No pause comes between: the refusal means the other
// commit is done, and the reload sees it. A turn that failed with
// host.ErrBusy (a database another writer kept locked past its busy
// timeout) is not run again: it already waited that long, and running it
// again would call the model again; HTTPStatus answers it 503, for the
// client to retry.
//
// One Sessions serves any number of sessions and is safe for concurrent
// use; make one per agent and share it, since turns are serialised only
// among the callers of one Sessions.
type Sessions struct {
	agent *Agent
	store store.Store

	mu    sync.Mutex
	turns map[string]*turnLock
}

// turnLock is one session's lock, held by the turn in progress; waiters
// counts the turns that hold or want it, so the last one removes it.
type turnLock struct {
	ch      chan struct{} // a token: receive to lock, send to unlock
	waiters int
}

// NewSessions returns an agent configured by cfg (see New) and its turns
// over the sessions cfg.Saver keeps. The Saver must be a store.Store (every
// store of package host/store and its subpackages is); otherwise the error
// wraps ErrConfig.
func NewSessions(cfg Config) (*Sessions, error) {
	st, ok := cfg.Saver.(store.Store)
	if !ok {
		return nil, fmt.Errorf("%w: Sessions needs a Config.Saver that loads sessions too (a store.Store), have %T", ErrConfig, cfg.Saver)
	}
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Sessions{agent: a, store: st, turns: map[string]*turnLock{}}, nil
}

// Agent returns the agent that runs the turns, to run it on a session
// outside the store.
func (ss *Sessions) Agent() *Agent { return ss.agent }

// lock waits until no other turn of session id runs in this process, or
// until ctx ends.
func (ss *Sessions) lock(ctx context.Context, id string) (unlock func(), err error) {
	ss.mu.Lock()
	l := ss.turns[id]
	if l == nil {
		l = &turnLock{ch: make(chan struct{}, 1)}
		l.ch <- struct{}{}
		ss.turns[id] = l
	}
	l.waiters++
	ss.mu.Unlock()
	release := func() {
		ss.mu.Lock()
		if l.waiters--; l.waiters == 0 {
			delete(ss.turns, id)
		}
		ss.mu.Unlock()
	}
	select {
	case <-l.ch:
		return func() { l.ch <- struct{}{}; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("agent: waiting for the turn in progress on session %q: %w", id, ctx.Err())
	}
}

// Run runs one turn on session id, as Agent.Run does, and returns its
// result; see Sessions for the loading, the serialisation and the retries.
func (ss *Sessions) Run(ctx context.Context, id string, input []abi.Message, opts *RunOptions) (*RunResult, error) {
	unlock, err := ss.lock(ctx, id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		s, err := store.LoadOrNew(ctx, ss.store, id)
		if err != nil {
			return nil, fmt.Errorf("agent: session %q: %w", id, err)
		}
		loaded := s.Revision
		res, err := ss.agent.Run(ctx, s, input, opts)
		if !retryable(err, s, loaded, attempt) {
			return res, err
		}
	}
}

// RunStream runs one turn on session id, as Agent.RunStream does; see
// Sessions for the loading, the serialisation and the retries. The turn
// holds the session until the sequence ends or its consumer stops.
func (ss *Sessions) RunStream(ctx context.Context, id string, input []abi.Message, opts *RunOptions) iter.Seq2[RunUpdate, error] {
	return func(yield func(RunUpdate, error) bool) {
		unlock, err := ss.lock(ctx, id)
		if err != nil {
			yield(RunUpdate{}, err)
			return
		}
		defer unlock()
		for attempt := 1; ; attempt++ {
			s, err := store.LoadOrNew(ctx, ss.store, id)
			if err != nil {
				yield(RunUpdate{}, fmt.Errorf("agent: session %q: %w", id, err))
				return
			}
			loaded, streamed, retry := s.Revision, false, false
			for u, err := range ss.agent.RunStream(ctx, s, input, opts) {
				if !streamed && retryable(err, s, loaded, attempt) {
					retry = true // nothing reached the caller: run again
					break
				}
				streamed = true
				if !yield(u, err) || err != nil {
					return
				}
			}
			if !retry {
				return
			}
		}
	}
}

// retryable reports whether a turn that failed with err on s, loaded at
// revision loaded, runs again: another process committed under it, and it
// committed nothing itself (per service call, a turn commits after each
// model call; run again, it would store its input twice).
func retryable(err error, s *session.Session, loaded int64, attempt int) bool {
	return errors.Is(err, session.ErrStaleRevision) && s.Revision == loaded && attempt < StaleAttempts
}

// History yields the stored history of session id (see Agent.History);
// a session the store does not hold has none.
func (ss *Sessions) History(ctx context.Context, id string) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		s, err := store.LoadOrNew(ctx, ss.store, id)
		if err != nil {
			yield(abi.Message{}, fmt.Errorf("agent: session %q: %w", id, err))
			return
		}
		for m, err := range ss.agent.History(ctx, s) {
			if !yield(m, err) {
				return
			}
		}
	}
}
