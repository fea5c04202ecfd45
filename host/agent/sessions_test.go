package agent_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

func newSessions(t *testing.T, m model.Client, perCall ...bool) (*agent.Sessions, *store.Dir) {
	t.Helper()
	dir, err := store.NewDir(t.TempDir())
	require.NoError(t, err)
	ss, err := agent.NewSessions(agent.Config{
		Model:                            m,
		Tools:                            []agent.Tool{clockTool()},
		Providers:                        []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history")}},
		Saver:                            dir,
		RequirePerServiceCallPersistence: len(perCall) > 0 && perCall[0],
	})
	require.NoError(t, err)
	return ss, dir
}

func history(t *testing.T, ss *agent.Sessions, id string) []string {
	t.Helper()
	var out []string
	for m, err := range ss.History(context.Background(), id) {
		require.NoError(t, err)
		out = append(out, string(m.Role)+":"+m.TextContent())
	}
	return out
}

// TestSessionsHammer: 16 goroutines each run 4 turns on one session
// through one Sessions, streaming or not; every turn commits (no stale
// revision reaches a caller), and the stored history is the 64 turns, each
// question followed by its answer.
func TestSessionsHammer(t *testing.T) {
	const workers, turns = 16, 4
	ss, dir := newSessions(t, offline.New())
	var wg sync.WaitGroup
	errs := make(chan error, workers*turns)
	for w := range workers {
		wg.Go(func() {
			for i := range turns {
				q := []abi.Message{abi.NewMessage(abi.RoleUser, fmt.Sprintf("I like w%dt%d", w, i))}
				if (w+i)%2 == 0 {
					_, err := ss.Run(context.Background(), "shared", q, nil)
					errs <- err
					continue
				}
				var err error
				for _, e := range ss.RunStream(context.Background(), "shared", q, nil) {
					err = e
				}
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s, err := dir.Load(context.Background(), "shared")
	require.NoError(t, err)
	assert.EqualValues(t, workers*turns, s.Revision)
	h := history(t, ss, "shared")
	require.Len(t, h, 2*workers*turns)
	seen := map[string]bool{}
	for i := 0; i < len(h); i += 2 {
		require.True(t, strings.HasPrefix(h[i], "user:I like w"), "message %d: %s", i, h[i])
		require.True(t, strings.HasPrefix(h[i+1], "assistant:"), "message %d: %s", i+1, h[i+1])
		seen[h[i]] = true
	}
	assert.Len(t, seen, workers*turns, "each turn stored once")
}

// rivalModel is a model whose first call (second, with callFirst)
// another process's commit races: while the call is in flight, a rival
// saves the session at the next revision, so the turn's next commit is
// stale. Its first stream yields nothing when silent is set; with
// callFirst its first answer calls the clock tool.
type rivalModel struct {
	store     store.Store
	id        string
	silent    bool
	callFirst bool
	calls     atomic.Int32
}

func (m *rivalModel) rival(ctx context.Context) error {
	n := m.calls.Add(1)
	if m.callFirst {
		n--
	}
	if n != 1 {
		return nil
	}
	s, err := store.LoadOrNew(ctx, m.store, m.id)
	if err != nil {
		return err
	}
	s.Revision++
	return m.store.Save(ctx, s)
}

func (m *rivalModel) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	if err := m.rival(ctx); err != nil {
		return nil, err
	}
	if m.callFirst && m.calls.Load() == 1 {
		return &model.Response{Messages: []abi.Message{{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c1", Name: "clock", Arguments: []byte(`{}`)}}}}}, nil
	}
	return &model.Response{Messages: []abi.Message{abi.NewMessage(abi.RoleAssistant, "answer")}}, nil
}

func (m *rivalModel) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		first := m.calls.Load() == 0
		if err := m.rival(ctx); err != nil {
			yield(model.Update{}, err)
			return
		}
		if first && m.silent {
			return
		}
		yield(model.Update{Role: abi.RoleAssistant, Contents: []abi.Content{abi.Text("answer")}}, nil)
	}
}

// TestSessionsStaleRevision: a turn another process committed under is run
// again on the session loaded anew, unless something of it was streamed or
// it committed an earlier model call: then the caller gets
// session.ErrStaleRevision, and only what committed is stored.
func TestSessionsStaleRevision(t *testing.T) {
	cases := []struct {
		name      string
		stream    bool
		silent    bool
		wantCalls int32
		wantStale bool
		perCall   bool
		callFirst bool
		// After a stale turn: the stored revision and history.
		wantRevision int64
		wantHistory  []string
	}{
		{name: "run", wantCalls: 2},
		{name: "stream, nothing streamed before the commit", stream: true, silent: true, wantCalls: 2},
		{name: "stream, text streamed before the commit", stream: true, wantCalls: 1, wantStale: true},
		{name: "run per service call, an earlier call committed", perCall: true, callFirst: true, wantCalls: 2, wantStale: true,
			wantRevision: 2, wantHistory: []string{"user:q", "assistant:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &rivalModel{id: "u", silent: c.silent, callFirst: c.callFirst}
			ss, dir := newSessions(t, m, c.perCall)
			m.store = dir
			q := []abi.Message{abi.NewMessage(abi.RoleUser, "q")}
			var err error
			var text string
			if c.stream {
				for u, e := range ss.RunStream(context.Background(), "u", q, nil) {
					text += u.Text()
					err = e
				}
			} else {
				_, err = ss.Run(context.Background(), "u", q, nil)
			}
			assert.Equal(t, c.wantCalls, m.calls.Load(), "model calls")
			s, lerr := dir.Load(context.Background(), "u")
			require.NoError(t, lerr)
			if c.wantStale {
				require.ErrorIs(t, err, session.ErrStaleRevision)
				if c.stream {
					assert.Equal(t, "answer", text, "what reached the caller before the error")
				}
				if c.wantRevision == 0 {
					c.wantRevision = 1 // the rival's commit only
				}
				assert.Equal(t, c.wantRevision, s.Revision)
				assert.Equal(t, c.wantHistory, history(t, ss, "u"), "stored once, not run again")
				return
			}
			require.NoError(t, err)
			assert.EqualValues(t, 2, s.Revision, "the rival's commit, then the turn's")
			assert.Equal(t, []string{"user:q", "assistant:answer"}, history(t, ss, "u"))
		})
	}
}

// TestSessionsWaitEndsWithContext: a turn waiting for the session's turn in
// progress gives up when its context ends, and the session is free again
// once the turn in progress ends.
func TestSessionsWaitEndsWithContext(t *testing.T) {
	ss, _ := newSessions(t, offline.New())
	q := []abi.Message{abi.NewMessage(abi.RoleUser, "hello")}
	next, stop := iter.Pull2(ss.RunStream(context.Background(), "u", q, nil))
	_, err, ok := next() // the first turn holds the session
	require.True(t, ok)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ss.Run(ctx, "u", q, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, `turn in progress on session "u"`)

	stop()
	_, err = ss.Run(context.Background(), "u", q, nil)
	require.NoError(t, err)
}

// TestNewSessionsNeedsAStore: an agent whose Saver cannot load is refused.
func TestNewSessionsNeedsAStore(t *testing.T) {
	_, err := agent.NewSessions(agent.Config{Model: offline.New()})
	require.ErrorIs(t, err, agent.ErrConfig)
	assert.ErrorContains(t, err, "store.Store")
	dir, err := store.NewDir(t.TempDir())
	require.NoError(t, err)
	_, err = agent.NewSessions(agent.Config{Saver: dir})
	require.ErrorIs(t, err, agent.ErrConfig, "the agent's own configuration is checked too")
	assert.ErrorContains(t, err, "no model client")
}
