package agent

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/session"
)

var update = flag.Bool("update", false, "rewrite persistence.md's configuration table from the mode table")

const (
	modesBegin = "<!-- modes:begin (generated from modes in mode.go; go test ./host/agent -run TestPersistenceDocMatchesModes -update) -->\n"
	modesEnd   = "<!-- modes:end -->\n"
)

// TestPersistenceDocMatchesModes keeps persistence.md's configuration
// table the rendering of the Go table the code runs on.
func TestPersistenceDocMatchesModes(t *testing.T) {
	const path = "persistence.md"
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, modesBegin)
	j := strings.Index(doc, modesEnd)
	require.True(t, i >= 0 && j > i, "persistence.md lacks the generated table's markers %q and %q", modesBegin, modesEnd)
	want := doc[:i+len(modesBegin)] + modesMarkdown() + doc[j:]
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, doc, "persistence.md's table differs from modes; run the test with -update")
}

// allFacts returns every consistent combination of the facts that decide
// a mode: a loader that stores everything needs a loader.
func allFacts() []facts {
	var out []facts
	for bits := 0; bits < 1<<6; bits++ {
		bit := func(i int) bool { return bits&(1<<i) != 0 }
		for _, c := range []ConflictMode{ConflictThrow, ConflictWarn, ConflictClear} {
			f := facts{perCall: bit(0), middleware: bit(1), keeps: bit(2), continues: bit(3), loader: bit(4), replayable: bit(5), conflict: c}
			if f.replayable && !f.loader {
				continue
			}
			out = append(out, f)
		}
	}
	return out
}

// TestModeTableIsComplete checks the table itself: every combination has
// a mode, every row is some combination's mode, and every row says whether
// it persists per call (PersistPerServiceCall acts on that alone).
func TestModeTableIsComplete(t *testing.T) {
	chosen := map[mode]int{}
	for _, f := range allFacts() {
		row := resolveMode(f)
		require.NotNil(t, row)
		chosen[row.mode]++
	}
	for i, r := range modes {
		assert.Equal(t, mode(i), r.mode, "row %d (%s) is out of place", i, r.name)
		assert.Positive(t, chosen[r.mode], "row %q is never chosen: an earlier row shadows it", r.name)
		assert.NotEqual(t, anyValue, r.perCall, "row %q must say whether it persists per call", r.name)
		if r.mode != modeRejectConflict && r.mode != modeSharedHistory && r.mode != modeServiceHistory {
			assert.Equal(t, anyConflict, r.conflict, "row %q depends on Conflict", r.name)
		}
	}
}

type countingProvider struct {
	HistoryProvider
	provides atomic.Int32
}

func (c *countingProvider) Provide(ctx context.Context, s *session.Session, request []abi.Message) ([]abi.Message, error) {
	c.provides.Add(1)
	return c.HistoryProvider.Provide(ctx, s, request)
}

// modeSetup is a configuration that has the given facts.
type modeSetup struct {
	agent   *Agent
	session *session.Session
	svc     *fakeService
	primary *MemoryProvider // the loader, or a store-only provider
	loads   *countingProvider
	audit   *MemoryProvider
}

func newModeSetup(t *testing.T, f facts, failAt int) modeSetup {
	t.Helper()
	m := modeSetup{
		session: session.New(),
		svc:     &fakeService{stores: f.keeps, failAt: failAt},
		primary: NewMemoryProvider("primary"),
		audit:   NewMemoryProvider("audit"),
	}
	m.loads = &countingProvider{HistoryProvider: m.primary}
	if f.continues {
		m.session.ServiceSessionID = "conv-0"
		m.svc.convs = map[string][]abi.Message{"conv-0": nil}
	}
	loader := ProviderConfig{Provider: m.loads, SkipLoad: !f.loader}
	if !f.replayable {
		// Stores everything still, but the middleware cannot know that.
		loader.StoreInputFilter = func(m []abi.Message) []abi.Message { return m }
	}
	cfg := Config{
		Model:                            m.svc.client(),
		Tools:                            []Tool{lookupTool()},
		Providers:                        []ProviderConfig{loader, Audit(m.audit)},
		Store:                            model.Bool(f.keeps),
		RequirePerServiceCallPersistence: f.perCall,
		Conflict:                         f.conflict,
		Logger:                           (&logCapture{}).logger(),
	}
	switch {
	case f.perCall:
		cfg.UseClientAsIs = !f.middleware
	case f.middleware:
		cfg.Model = PersistPerServiceCall(cfg.Model)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	m.agent = a
	return m
}

// TestEveryModeBehavesAsItsRow runs one turn (user message, tool call,
// tool result, answer) for every consistent combination of facts, once
// succeeding and once with the second model call failing, and checks what
// the row of its mode says: when history loads, when providers store, what
// a failure leaves.
func TestEveryModeBehavesAsItsRow(t *testing.T) {
	const (
		afterCall1 = "user:q1 call:c1"
		turn       = "user:q1 call:c1 result:c1 asst:answer to c1"
	)
	for _, f := range allFacts() {
		row := resolveMode(f)
		name := fmt.Sprintf("%s/perCall=%v,middleware=%v,keeps=%v,continues=%v,loader=%v,replayable=%v,conflict=%d",
			row.name, f.perCall, f.middleware, f.keeps, f.continues, f.loader, f.replayable, f.conflict)
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			in := []abi.Message{abi.NewMessage(abi.RoleUser, "q1")}
			// Per run, a service that returns an id while a provider loads
			// meets Config.Conflict after the first call.
			midRunConflict := row.mode == modePerRun && f.keeps && f.loader

			m := newModeSetup(t, f, 0)
			before := mustJSON(t, m.session)
			r, err := m.agent.newRun(ctx, m.session.Clone(), in, nil, nil)
			if row.err != nil {
				require.ErrorIs(t, err, row.err)
				_, err = m.agent.Run(ctx, m.session, in, nil)
				require.ErrorIs(t, err, row.err)
				assert.Empty(t, m.svc.requests(), "a refused run calls no model")
				assert.Equal(t, before, mustJSON(t, m.session), "a refused run changes the session")
				return
			}
			require.NoError(t, err)
			require.Same(t, row, r.mode)
			m.loads.provides.Store(0)

			var persistedBeforeCall2 string
			m.svc.observe = func(model.Request) {
				if m.svc.calls == 1 {
					persistedBeforeCall2 = stored(t, m.audit, m.session)
				}
			}
			_, err = m.agent.Run(ctx, m.session, in, nil)
			if !f.perCall && f.continues && !f.keeps {
				// Per run, store=false does not stop the loop from sending
				// the session's conversation id, and the service does not
				// keep the first call, so it refuses the second. Per call,
				// the same facts are refused up front.
				require.ErrorContains(t, err, "model call 2")
				assert.Equal(t, before, mustJSON(t, m.session))
				return
			}
			if midRunConflict && f.conflict == ConflictThrow {
				require.ErrorIs(t, err, ErrHistoryConflict)
				assert.Equal(t, before, mustJSON(t, m.session))
				return
			}
			require.NoError(t, err)

			wantLoads := map[loadWhen]int32{loadNever: 0, loadOnce: 1, loadEveryCall: 2}[row.load]
			if !f.loader {
				wantLoads = 0
			}
			assert.Equal(t, wantLoads, m.loads.provides.Load(), "history loads")

			wantBefore2, wantAudit, wantPrimary := "", turn, turn
			switch row.store {
			case storeEveryCall:
				wantBefore2 = afterCall1
			case storeNever:
				wantAudit, wantPrimary = "", ""
			case storeAtEndStoreOnly:
				wantPrimary = ""
			}
			if midRunConflict && f.conflict == ConflictClear {
				wantPrimary = ""
			}
			assert.Equal(t, wantBefore2, persistedBeforeCall2, "stored before the second call")
			assert.Equal(t, wantAudit, stored(t, m.audit, m.session), "store-only provider after the run")
			assert.Equal(t, wantPrimary, stored(t, m.primary, m.session), "loader after the run")

			wantID := ""
			if f.keeps {
				wantID = "conv-1"
				if f.continues {
					wantID = "conv-0"
				}
			}
			assert.Equal(t, wantID, m.session.ServiceSessionID)
			wantRevision := map[storeWhen]int64{storeAtEnd: 1, storeAtEndStoreOnly: 1, storeEveryCall: 2}[row.store]
			if row.store == storeNever && f.keeps && !f.continues {
				wantRevision = 1 // the new service id, committed at the end
			}
			assert.Equal(t, wantRevision, m.session.Revision)

			// The same turn with the second model call failing.
			m = newModeSetup(t, f, 2)
			before = mustJSON(t, m.session)
			_, err = m.agent.Run(ctx, m.session, in, nil)
			require.ErrorIs(t, err, errServiceDown)
			if row.store == storeEveryCall {
				assert.Equal(t, afterCall1, stored(t, m.audit, m.session), "a failed run keeps the calls that succeeded")
				// ...and, in a second commit, the result the tool returned
				// for the call the first one left open.
				assert.Equal(t, int64(2), m.session.Revision)
				require.Len(t, m.session.PendingToolCalls, 1)
				assert.True(t, m.session.PendingToolCalls[0].Done)
				return
			}
			assert.Equal(t, before, mustJSON(t, m.session), "a failed run changes the session")
		})
	}
}
