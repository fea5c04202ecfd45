package agent_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// history is what the plugin serves for the stored session, and its
// revision.
func (rig *commitRig) history(t *testing.T, id string) ([]string, int64) {
	t.Helper()
	ctx := context.Background()
	s, err := rig.store.Load(ctx, id)
	require.NoError(t, err)
	var out []string
	for cursor := ""; ; {
		msgs, next, err := rig.plugin.List(ctx, s, "history", cursor, 100)
		require.NoError(t, err)
		for _, m := range msgs {
			out = append(out, string(m.Role)+":"+m.TextContent())
		}
		if next == "" {
			return out, s.Revision
		}
		cursor = next
	}
}

// checkRunIDWindow: a run repeated with an earlier run id (not only the
// last) returns the reply it committed and stores nothing; the id with
// another input is refused with ErrRunIDReused and stores nothing; the
// window holds session.MaxRecentRuns ids, and an id older than that runs
// again.
func checkRunIDWindow(t *testing.T, rig *commitRig) {
	r3, err := rig.turn(t, "s", "I like cake", "r3")
	require.NoError(t, err)
	require.False(t, r3.Replayed)
	_, err = rig.turn(t, "s", "what do I like", "r4")
	require.NoError(t, err)
	hist, rev := rig.history(t, "s")
	require.Equal(t, []string{"user:I like cake", "assistant:echo I like cake", "user:what do I like", "assistant:echo what do I like"}, hist)
	require.EqualValues(t, 2, rev)

	again, err := rig.turn(t, "s", "I like cake", "r3")
	require.NoError(t, err)
	assert.True(t, again.Replayed, "r3 repeated after r4 is recognised")
	assert.Equal(t, r3.Messages, again.Messages, "r3 repeated returns r3's reply")
	h, r := rig.history(t, "s")
	assert.Equal(t, hist, h, "r3 repeated stores nothing")
	assert.Equal(t, rev, r, "r3 repeated commits nothing")

	_, err = rig.turn(t, "s", "I like tea", "r3")
	require.ErrorIs(t, err, agent.ErrRunIDReused)
	assert.ErrorContains(t, err, `run "r3"`)
	assert.ErrorContains(t, err, "new run id")
	h, r = rig.history(t, "s")
	assert.Equal(t, hist, h, "r3 with another input stores nothing")
	assert.Equal(t, rev, r, "r3 with another input commits nothing")

	// r3 and r4 and 62 more: r3 is the oldest id the window holds.
	for i := 2; i < session.MaxRecentRuns; i++ {
		_, err := rig.turn(t, "s", fmt.Sprint("more ", i), fmt.Sprint("w", i))
		require.NoError(t, err)
	}
	hist, rev = rig.history(t, "s")
	again, err = rig.turn(t, "s", "I like cake", "r3")
	require.NoError(t, err)
	assert.True(t, again.Replayed, "r3 is the oldest of %d run ids", session.MaxRecentRuns)
	assert.Equal(t, r3.Messages, again.Messages)
	h, r = rig.history(t, "s")
	assert.Equal(t, hist, h)
	assert.Equal(t, rev, r)

	// One more, and r3 is out of the window: it runs again.
	_, err = rig.turn(t, "s", "more 64", "w64")
	require.NoError(t, err)
	again, err = rig.turn(t, "s", "I like cake", "r3")
	require.NoError(t, err)
	assert.False(t, again.Replayed, "r3 after %d later run ids is not recognised", session.MaxRecentRuns)
	h, r = rig.history(t, "s")
	assert.Equal(t, append(hist, "user:more 64", "assistant:echo more 64", "user:I like cake", "assistant:echo I like cake"), h)
	assert.Equal(t, rev+2, r)
}

// TestRunIDWindow runs checkRunIDWindow with the in-memory and the sqlite
// WebAssembly plugins, for every kind of session store.
func TestRunIDWindow(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	for _, plugin := range []string{"inmemory", "sqlite"} {
		wasm := sdktest.BuildPlugin(t, "../../plugins/"+plugin)
		for _, kind := range storeKinds {
			t.Run(plugin+"/"+kind.name, func(t *testing.T) {
				checkRunIDWindow(t, newCommitRig(t, h, wasm, kind.open))
			})
		}
	}
}

// TestRunIDWindowPostgres is TestRunIDWindow with the sqlite plugin's data
// in PostgreSQL: the sessions in the same database and in a session file.
func TestRunIDWindowPostgres(t *testing.T) {
	dsn, h := postgresHost(t)
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	for n, kind := range []struct {
		name   string
		sameDB bool
	}{{"postgres-same-db", true}, {"file+postgres", false}} {
		t.Run(kind.name, func(t *testing.T) {
			checkRunIDWindow(t, newPGCommitRig(t, h, wasm, dsn, n+1, kind.sameDB))
		})
	}
}
