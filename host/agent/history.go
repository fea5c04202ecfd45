package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/session"
)

// ErrNoHistory reports an agent whose history cannot be read: it has no
// provider, or its provider cannot list what it stored.
var ErrNoHistory = errors.New("agent: no provider lists the history")

// HistoryLister is a HistoryProvider that pages through what it stored for
// a session, oldest first: the cursor of the next page, "" after the last.
// A plugin's provider (host.Provider) and MemoryProvider are listers.
type HistoryLister interface {
	HistoryProvider
	List(ctx context.Context, s *session.Session, cursor string, limit int) ([]abi.Message, string, error)
}

// History yields every message stored for s, oldest first, fetching a
// page at a time: those of the provider that loads history or, when every
// provider only stores (the service keeps the conversation), of the first.
// It is what the provider stored, not what a run would load (no filter or
// reducer applies). The sequence ends with a non-nil error if a page cannot
// be read; ErrNoHistory if the provider cannot list.
func (a *Agent) History(ctx context.Context, s *session.Session) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		if len(a.cfg.Providers) == 0 {
			yield(abi.Message{}, fmt.Errorf("%w: the agent has no provider", ErrNoHistory))
			return
		}
		pc := a.cfg.Providers[0]
		if a.loader >= 0 {
			pc = a.cfg.Providers[a.loader]
		}
		l, ok := pc.Provider.(HistoryLister)
		if !ok {
			yield(abi.Message{}, fmt.Errorf("%w: provider %q (%T) has no List method", ErrNoHistory, pc.Provider.StateKey(), pc.Provider))
			return
		}
		for cursor, seen := "", map[string]bool{}; ; {
			page, next, err := l.List(ctx, s, cursor, 0)
			if err != nil {
				yield(abi.Message{}, fmt.Errorf("agent: history of session %q from %q: %w", s.SessionID, pc.Provider.StateKey(), err))
				return
			}
			for _, m := range page {
				if !yield(m, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			// A cursor that comes back, or pages that bring nothing,
			// would page forever.
			if seen[next] || len(page) == 0 {
				yield(abi.Message{}, fmt.Errorf("agent: history of session %q from %q: the provider returned cursor %q after an empty page or twice; it breaks the list contract (abi/SPEC.md)", s.SessionID, pc.Provider.StateKey(), next))
				return
			}
			seen[next] = true
			cursor = next
		}
	}
}

// List implements HistoryLister: the cursor is the index of the page's
// first message, and limit (0: all) bounds the page.
func (p *MemoryProvider) List(_ context.Context, s *session.Session, cursor string, limit int) ([]abi.Message, string, error) {
	msgs, err := p.Messages(s)
	if err != nil {
		return nil, "", err
	}
	from := 0
	if cursor != "" {
		if from, err = strconv.Atoi(cursor); err != nil || from < 0 || from > len(msgs) {
			return nil, "", fmt.Errorf("memory provider %q: %w: cursor %q", p.key, abi.ErrInvalidArgument, cursor)
		}
	}
	to := len(msgs)
	if limit > 0 && from+limit < to {
		to = from + limit
	}
	next := ""
	if to < len(msgs) {
		next = strconv.Itoa(to)
	}
	return msgs[from:to], next, nil
}
