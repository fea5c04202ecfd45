package conversation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
)

// keptBy is how many messages of the 10-turn parent a fork at turn at
// keeps: four a turn.
func keptBy(at int) int {
	if at == 0 {
		return 40
	}
	return 4 * at
}

// TestForkAtEveryTurn: a 10-turn conversation with a tool call in every
// turn is forked at every turn boundary (and with at = 0, all of it),
// into the same plugin and store (the sqlite plugin on the SQLite file
// that holds the sessions too) and into another plugin and store; every
// branch and the parent are then continued, and each keeps its own
// history: the branch the parent's first turns and its own, the parent
// its ten and its own. No branch shares rows (a session key) with the
// parent or another branch.
func TestForkAtEveryTurn(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src := r.pair(t, sqliteOnSQLite, sqliteStore)
	targets := []struct {
		name string
		pr   *pairing
	}{
		{"same plugin and store", src},
		{"in-memory plugin, directory store", r.pair(t, inMemory, dirStore)},
		{"sqlite on PostgreSQL, file store", r.pair(t, sqliteOnPG, fileStore)},
	}
	parent := session.New()
	var inputs []string
	for i := 1; i <= 10; i++ {
		inputs = append(inputs, fmt.Sprint("q", i))
	}
	chat(t, src.plugin, src.storeOf(parent.SessionID), parent, inputs...)
	want := history(t, src.plugin, parent)
	require.Len(t, want, 40)
	from := map[string]*host.Plugin{key: src.plugin}

	keys := map[string]string{string(parent.State[key].Data): parent.SessionID}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			for at := 0; at <= 10; at++ {
				id := fmt.Sprintf("fork-%d-of-%s", at, parent.SessionID)
				fork, err := conversation.Fork(ctx, parent, from, at, tg.pr.target(id), id)
				require.NoError(t, err, "fork at %d", at)
				kept := keptBy(at)
				assert.Equal(t, want[:kept], history(t, tg.pr.plugin, fork), "fork at %d", at)
				assert.Equal(t, int64(1), fork.Revision)
				if tg.pr.plugin == src.plugin {
					data := string(fork.State[key].Data)
					require.NotContains(t, keys, data, "fork at %d shares rows with %s", at, keys[data])
					keys[data] = id
				}

				own := fmt.Sprintf("branch-%d", at)
				chat(t, tg.pr.plugin, tg.pr.storeOf(id), fork, own)
				stored, err := tg.pr.load(t, id)
				require.NoError(t, err)
				assert.Equal(t, append(texts(want[:kept]), "user:"+own, "assistant:call:c-"+own, "tool:result:c-"+own, "assistant:answer to "+own),
					texts(history(t, tg.pr.plugin, stored)), "branch at %d after its own turn", at)
				assert.Equal(t, want, history(t, src.plugin, parent), "the branch at %d changed its parent", at)
			}
		})
	}
	chat(t, src.plugin, src.storeOf(parent.SessionID), parent, "parent-q11")
	assert.Equal(t, append(texts(want), "user:parent-q11", "assistant:call:c-parent-q11", "tool:result:c-parent-q11", "assistant:answer to parent-q11"),
		texts(history(t, src.plugin, parent)))
	for at := 0; at <= 10; at++ {
		id := fmt.Sprintf("fork-%d-of-%s", at, parent.SessionID)
		fork, err := src.load(t, id)
		require.NoError(t, err)
		assert.Len(t, history(t, src.plugin, fork), keptBy(at)+4, "the parent's turn reached the branch at %d", at)
	}

	t.Run("past the last turn", func(t *testing.T) {
		_, err := conversation.Fork(ctx, parent, from, 12, src.target("too-far"), "too-far")
		require.ErrorIs(t, err, conversation.ErrNoSuchTurn)
		assert.ErrorContains(t, err, "has 11, not 12")
		_, err = src.load(t, "too-far")
		require.ErrorIs(t, err, session.ErrNotFound)
	})
	t.Run("onto an existing session", func(t *testing.T) {
		id := "fork-3-of-" + parent.SessionID
		before, err := src.load(t, id)
		require.NoError(t, err)
		_, err = conversation.Fork(ctx, parent, from, 1, src.target(id), id)
		require.ErrorIs(t, err, conversation.ErrSessionExists)
		after, err := src.load(t, id)
		require.NoError(t, err)
		assert.Equal(t, before, after)
		assert.Len(t, history(t, src.plugin, after), 16)
	})
	t.Run("without a source plugin", func(t *testing.T) {
		_, err := conversation.Fork(ctx, parent, nil, 1, src.target("x"), "x")
		require.ErrorIs(t, err, conversation.ErrNoPlugin)
	})
}
