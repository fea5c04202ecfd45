package conversation_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// TestMigrate moves sessions from SQLite (sqlitestore, the sqlite plugin
// on the same file) to PostgreSQL (pgstore, the sqlite plugin on the same
// database): every session arrives with its history, message by message,
// at its revision; a second run changes nothing; a session chatted on the
// source since is replaced whole (its old rows gone); one chatted on the
// destination since is left alone; and the copies run on their own.
func TestMigrate(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	src := r.pair(t, sqliteOnSQLite, sqliteStore)
	dst := r.pair(t, sqliteOnPG, pgStore)
	from := conversation.Source{Store: src.storeOf("").(store.Manager), Plugins: conversation.Plugins{key: src.plugin}}
	to := conversation.Destination{Store: dst.storeOf("").(store.Store), Plugins: conversation.Plugins{key: dst.plugin}}

	ss := []*session.Session{session.New(), session.New(), session.New()}
	for i, s := range ss {
		chat(t, src.plugin, from.Store, s, []string{"a", "b", "c"}[:i+1]...)
	}
	outcomes := func(ms []conversation.Migrated) map[string]conversation.Outcome {
		out := map[string]conversation.Outcome{}
		for _, m := range ms {
			out[m.SessionID] = m.Outcome
		}
		return out
	}
	all := func(o conversation.Outcome) map[string]conversation.Outcome {
		out := map[string]conversation.Outcome{}
		for _, s := range ss {
			out[s.SessionID] = o
		}
		return out
	}
	check := func(t *testing.T) {
		t.Helper()
		for _, s := range ss {
			got, err := to.Store.Load(ctx, s.SessionID)
			require.NoError(t, err)
			assert.Equal(t, s.Revision, got.Revision)
			assert.Equal(t, history(t, src.plugin, s), history(t, dst.plugin, got), "history of %s", s.SessionID)
		}
	}

	var progress []conversation.Migrated
	ms, err := conversation.Migrate(ctx, from, to, &conversation.MigrateOptions{Progress: func(m conversation.Migrated) { progress = append(progress, m) }})
	require.NoError(t, err)
	assert.Equal(t, all(conversation.Copied), outcomes(ms))
	assert.Equal(t, ms, progress)
	assert.Equal(t, 4+8+12, ms[0].Messages+ms[1].Messages+ms[2].Messages)
	check(t)
	assert.Equal(t, 24, dst.rows(t))

	ms, err = conversation.Migrate(ctx, from, to, nil)
	require.NoError(t, err)
	assert.Equal(t, all(conversation.Unchanged), outcomes(ms), "a second run")
	assert.Equal(t, 24, dst.rows(t))

	chat(t, src.plugin, from.Store, ss[0], "d")
	ms, err = conversation.Migrate(ctx, from, to, nil)
	require.NoError(t, err)
	want := all(conversation.Unchanged)
	want[ss[0].SessionID] = conversation.Updated
	assert.Equal(t, want, outcomes(ms), "after the source went on")
	check(t)
	assert.Equal(t, 28, dst.rows(t), "the replaced copy's rows were cleared")

	moved, err := to.Store.Load(ctx, ss[1].SessionID)
	require.NoError(t, err)
	chat(t, dst.plugin, to.Store, moved, "on the destination")
	ms, err = conversation.Migrate(ctx, from, to, nil)
	require.NoError(t, err)
	want[ss[0].SessionID] = conversation.Unchanged
	want[ss[1].SessionID] = conversation.Diverged
	assert.Equal(t, want, outcomes(ms), "after the destination went on")
	assert.Len(t, history(t, dst.plugin, moved), 12, "the destination's own turn is kept")
	assert.Len(t, history(t, src.plugin, ss[1]), 8, "the source is only read")
}

// TestImportDefaultPages: an import with the default page bounds of a
// history longer than a page goes into the sqlite plugin, whose store
// writes a page of n messages in n+1 sql statements, under the sql
// capability's limit of 256 a request.
func TestImportDefaultPages(t *testing.T) {
	r := newRig(t)
	for _, pk := range []pluginKind{sqliteOnSQLite, sqliteOnPG} {
		t.Run(string(pk), func(t *testing.T) {
			pr := r.pair(t, pk, dirStore)
			var ms []abi.Message
			for i := range 600 {
				ms = append(ms, abi.NewMessage([]abi.Role{abi.RoleUser, abi.RoleAssistant}[i%2], fmt.Sprint("m", i)))
			}
			s, err := conversation.Import(context.Background(), &session.Session{SessionID: "long"},
				[]conversation.SlotHistory{{Key: key, History: values(ms)}}, pr.target("long"), nil)
			require.NoError(t, err)
			assert.Equal(t, ms, history(t, pr.plugin, s))
		})
	}
}
