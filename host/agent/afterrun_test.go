package agent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/session"
)

var errHook = errors.New("the hook refused")

// learner is an AfterRunner that records what it saw, keeps a counter in
// a session slot of its own, and fails when told to.
type learner struct {
	fail      bool
	seen      []string // renderIDs of each commit's messages
	revisions []int64  // the session's revision during each call
	committed int      // OnCommit calls
}

func (l *learner) Name() string { return "learner" }

func (l *learner) Context(context.Context, *session.Session, []abi.Message) ([]abi.Message, error) {
	return nil, nil
}

func (l *learner) AfterRun(ctx context.Context, c *agent.RunCommit) error {
	l.seen = append(l.seen, renderIDs(c.Messages))
	l.revisions = append(l.revisions, c.Session.Revision)
	if l.fail {
		return errHook
	}
	c.Session.SetState("learner", session.ProviderState{Provider: "learner", Data: []byte(fmt.Sprintf(`{"commits":%d}`, len(l.seen)))})
	c.OnCommit(func() { l.committed++ })
	return nil
}

// TestAfterRunHookInsideTheCommit: the hook sees what each commit records
// after the providers stored it and before the session is committed; what
// it changes in the session commits with the run; a hook that fails fails
// the run, and the rows the SQLite plugin wrote into the run's transaction
// roll back with it, leaving the session as it was. Per run and per
// service call.
func TestAfterRunHookInsideTheCommit(t *testing.T) {
	sqlite := sqlitePlugin(t)
	for _, perCall := range []bool{false, true} {
		for _, fail := range []bool{false, true} {
			t.Run(fmt.Sprintf("per-call=%v/fail=%v", perCall, fail), func(t *testing.T) {
				ctx := context.Background()
				l := &learner{fail: fail}
				a, err := agent.New(agent.Config{
					Model:                            offline.New(),
					Tools:                            []agent.Tool{agent.Tool(offline.Calculator())},
					Providers:                        []agent.ProviderConfig{{Provider: sqlite.Provider("history")}},
					ContextProviders:                 []agent.ContextProvider{l},
					RequirePerServiceCallPersistence: perCall,
				})
				require.NoError(t, err)
				s := session.New()
				_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "what is 6*7?")}, nil)
				if fail {
					require.ErrorIs(t, err, errHook)
					assert.Contains(t, err.Error(), `context provider "learner"`)
					assert.Zero(t, s.Revision, "the session moved on")
					assert.Empty(t, storedMessages(t, sqlite, s, "history"), "rows of the failed run remain")
					assert.Zero(t, l.committed, "OnCommit ran for a failed commit")
					require.Len(t, l.seen, 1)
					return
				}
				require.NoError(t, err)
				stored := renderIDs(storedMessages(t, sqlite, s, "history"))
				if perCall {
					// One commit per model call, each with what it records.
					require.Len(t, l.seen, 2)
					assert.Equal(t, []int64{0, 1}, l.revisions)
					assert.Equal(t, stored, l.seen[0]+" "+l.seen[1])
				} else {
					require.Len(t, l.seen, 1)
					assert.Equal(t, []int64{0}, l.revisions)
					assert.Equal(t, stored, l.seen[0])
				}
				assert.Contains(t, l.seen[0], "user:what is 6*7?")
				assert.Equal(t, len(l.seen), l.committed)
				assert.JSONEq(t, fmt.Sprintf(`{"commits":%d}`, len(l.seen)), string(s.State["learner"].Data), "the hook's change did not commit")
			})
		}
	}
}
