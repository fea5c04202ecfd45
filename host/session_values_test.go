package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// The tests in this file hold on to a session, or parts of it, while the
// host works on it, and check that what they hold never changes: sessions
// are values (see session.Session).

const historyKey = "history"

func loadInmemory(t testing.TB, h *host.Host) *host.Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), host.File(sdktest.BuildPlugin(t, "../plugins/inmemory")), host.LoadOptions{})
	require.NoError(t, err)
	return p
}

// echoModel answers every call with the text of the last message.
type echoModel struct{}

func (echoModel) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	return &model.Response{Messages: []abi.Message{abi.NewMessage(abi.RoleAssistant, "echo "+last.TextContent())}}, nil
}

func (m echoModel) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		r, err := m.Complete(ctx, req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		yield(model.Update{Role: abi.RoleAssistant, Contents: r.Messages[0].Contents}, nil)
	}
}

// seeded returns a session whose history slot holds n messages, written by
// patches (so the plugin's caches know the state).
func seeded(t testing.TB, prov *host.Provider, n int) *session.Session {
	t.Helper()
	s := session.New()
	for i := range n {
		require.NoError(t, prov.Store(context.Background(), s, []abi.Message{user(fmt.Sprint("seed ", i))}, nil))
	}
	return s
}

// retained is everything a caller can keep of a session: the struct by
// assignment, a Clone, the slot and its Data slice, and copies made
// before the call to compare them with.
type retained struct {
	assigned session.Session
	cloned   *session.Session
	slot     session.ProviderState
	data     []byte
	json     []byte // the session as it was
	dataCopy []byte // the slot's bytes as they were
}

func retain(t *testing.T, s *session.Session) retained {
	slot := s.State[historyKey]
	require.NotEmpty(t, slot.Data)
	return retained{
		assigned: *s,
		cloned:   s.Clone(),
		slot:     slot,
		data:     slot.Data,
		json:     sessionJSON(t, s),
		dataCopy: bytes.Clone(slot.Data),
	}
}

func jsonOf(s *session.Session) ([]byte, error) { return json.Marshal(s) }

func (r retained) check(t testing.TB) {
	t.Helper()
	assert.Equal(t, string(r.dataCopy), string(r.data), "a Data slice read before the call changed")
	assert.Equal(t, string(r.dataCopy), string(r.slot.Data), "a ProviderState read before the call changed")
	assert.Equal(t, string(r.dataCopy), string(r.assigned.State[historyKey].Data), "a session copied by assignment changed")
	assert.Equal(t, string(r.dataCopy), string(r.cloned.State[historyKey].Data), "a Clone changed")
	for name, s := range map[string]*session.Session{"assigned": &r.assigned, "cloned": r.cloned} {
		b, err := jsonOf(s)
		if assert.NoError(t, err) {
			assert.JSONEq(t, string(r.json), string(b), "%s session changed", name)
		}
	}
}

// TestRetainedSessionNeverChanges runs a turn, through the agent and
// through Provider.Store, on a session the test holds copies of.
func TestRetainedSessionNeverChanges(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, host.Config{})
	p := loadInmemory(t, h)
	prov := p.Provider(historyKey)

	turns := []struct {
		name string
		run  func(t *testing.T, s *session.Session)
	}{
		{name: "agent run", run: func(t *testing.T, s *session.Session) {
			a, err := agent.New(agent.Config{Model: echoModel{}, Providers: []agent.ProviderConfig{{Provider: prov}}})
			require.NoError(t, err)
			_, err = a.Run(ctx, s, []abi.Message{user("question")}, nil)
			require.NoError(t, err)
		}},
		{name: "Provider.Store", run: func(t *testing.T, s *session.Session) {
			require.NoError(t, prov.Store(ctx, s, []abi.Message{user("question")}, []abi.Message{abi.NewMessage(abi.RoleAssistant, "answer")}))
		}},
		{name: "Provider.Provide then Store", run: func(t *testing.T, s *session.Session) {
			_, err := prov.Provide(ctx, s, []abi.Message{user("question")})
			require.NoError(t, err)
			require.NoError(t, prov.Store(ctx, s, []abi.Message{user("question")}, nil))
		}},
	}
	for _, tt := range turns {
		t.Run(tt.name, func(t *testing.T) {
			s := seeded(t, prov, 5)
			kept := retain(t, s)
			for range 3 { // later turns too: each appends to the last one's state
				tt.run(t, s)
				kept.check(t)
			}
			assert.Greater(t, len(s.State[historyKey].Data), len(kept.dataCopy), "the turns stored nothing")

			// The retained copies are still sessions the host accepts, and
			// a turn on one of them starts from what it holds.
			hist, err := prov.Provide(ctx, &kept.assigned, nil)
			require.NoError(t, err)
			assert.Len(t, hist, 5)
			kept.check(t)
		})
	}
}

// breakState edits state in place so that it no longer satisfies the
// in-memory plugin's state schema (which requires "messages" and allows no
// other member), keeping its length and its JSON validity.
func breakState(t *testing.T, state []byte) {
	t.Helper()
	i := bytes.Index(state, []byte(`"messages"`))
	require.GreaterOrEqual(t, i, 0)
	state[i+len(`"message`)] = 'z' // "messagez"
}

// TestValidityCachesFollowContent edits, in place, bytes the host has seen
// (and validated) before: the host must validate them again, not accept
// them because it remembers the slice.
func TestValidityCachesFollowContent(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, host.Config{})
	p := loadInmemory(t, h)
	prov := p.Provider(historyKey)
	store := func(s *session.Session) error {
		return prov.Store(ctx, s, []abi.Message{user("more")}, nil)
	}
	withData := func(s *session.Session, data []byte) *session.Session {
		slot := s.State[historyKey]
		slot.Data = data
		return &session.Session{SchemaVersion: s.SchemaVersion, SessionID: s.SessionID, State: map[string]session.ProviderState{historyKey: slot}}
	}

	t.Run("old state edited after a turn", func(t *testing.T) {
		s := seeded(t, prov, 3)
		old := s.State[historyKey].Data
		require.NoError(t, store(s))
		breakState(t, old)
		err := store(withData(s, old))
		require.ErrorIs(t, err, host.ErrInvalidState, "an edited old state was accepted from a cache")
		// The new state is untouched by the edit and still accepted.
		require.NoError(t, store(s))
	})
	t.Run("new state edited after a turn", func(t *testing.T) {
		s := seeded(t, prov, 3)
		require.NoError(t, store(s))
		next := s.State[historyKey].Data
		breakState(t, next)
		require.ErrorIs(t, store(s), host.ErrInvalidState, "an edited new state was accepted under the identity of the bytes the host produced")
		_, err := prov.Provide(ctx, s, nil)
		require.ErrorIs(t, err, host.ErrInvalidState)
	})
	t.Run("edited state that stays valid is read as edited", func(t *testing.T) {
		s := seeded(t, prov, 3)
		data := s.State[historyKey].Data
		i := bytes.Index(data, []byte("seed 2"))
		require.GreaterOrEqual(t, i, 0)
		copy(data[i:], "edit 2")
		hist, err := prov.Provide(ctx, s, nil)
		require.NoError(t, err)
		require.Len(t, hist, 3)
		assert.Equal(t, "edit 2", hist[2].TextContent(), "history served from the Doc of the bytes before the edit")
	})
}

// TestHammerStoreOnClones stores concurrently on clones and plain copies
// of one session; each goroutine checks that what it retained of its input
// never changed and that its result is its own. Run with -race.
func TestHammerStoreOnClones(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, host.Config{Limits: host.Limits{MaxInstances: 3}})
	p := loadInmemory(t, h)
	prov := p.Provider(historyKey)
	base := seeded(t, prov, 4)
	baseJSON := sessionJSON(t, base)
	baseData := bytes.Clone(base.State[historyKey].Data)

	const workers, rounds = 8, 6
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s *session.Session
			if w%2 == 0 {
				s = base.Clone()
			} else {
				c := *base // shares base's map and bytes
				s = &c
			}
			type held struct{ data, copy []byte }
			var all []held
			for r := range rounds {
				d := s.State[historyKey].Data
				all = append(all, held{d, bytes.Clone(d)})
				if !assert.NoError(t, prov.Store(ctx, s, []abi.Message{user(fmt.Sprint(w, "-", r))}, nil)) {
					return
				}
			}
			for i, k := range all {
				assert.Equal(t, string(k.copy), string(k.data), "worker %d: input of round %d changed", w, i)
			}
			hist, err := prov.Provide(ctx, s, nil)
			if assert.NoError(t, err) && assert.Len(t, hist, 4+rounds) {
				for r := range rounds {
					assert.Equal(t, fmt.Sprint(w, "-", r), hist[4+r].TextContent(), "worker %d", w)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, string(baseData), string(base.State[historyKey].Data), "the shared base session's bytes changed")
	b, err := jsonOf(base)
	require.NoError(t, err)
	assert.JSONEq(t, string(baseJSON), string(b), "the shared base session changed")
}
