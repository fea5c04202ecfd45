package conversation_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// exportDoc exports s, read through p, into a portable document.
func exportDoc(ctx context.Context, s *session.Session, p *host.Plugin) ([]byte, error) {
	var b bytes.Buffer
	if _, err := conversation.Export(ctx, s, map[string]*host.Plugin{key: p}, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// readDoc reads a document of one slot back: its session and history.
func readDoc(t testing.TB, doc []byte) (*session.Session, []abi.Message) {
	t.Helper()
	r, err := portable.NewReader(bytes.NewReader(doc), portable.Limits{})
	require.NoError(t, err)
	var msgs []abi.Message
	for sl, err := range r.Slots() {
		require.NoError(t, err)
		require.Equal(t, key, sl.Key)
		for m, err := range sl.Messages() {
			require.NoError(t, err)
			msgs = append(msgs, m)
		}
	}
	return r.Session(), msgs
}

// TestExportRoundTrip: a session chatted with tool calls, exported from
// each plugin and imported from the document under a new id into the
// same plugin and store, reads back identical message by message; the
// copy continues without changing the original.
func TestExportRoundTrip(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, pk := range pluginKinds {
		t.Run(string(pk), func(t *testing.T) {
			pr := r.pair(t, pk, fileStore)
			orig := session.New()
			chat(t, pr.plugin, pr.storeOf(orig.SessionID), orig, "q1", "q2", "q3")
			want := history(t, pr.plugin, orig)
			require.Len(t, want, 12)

			doc, err := exportDoc(ctx, orig, pr.plugin)
			require.NoError(t, err)
			fields, got := readDoc(t, doc)
			assert.Equal(t, want, got)
			assert.Equal(t, orig.Revision, fields.Revision)

			fields.SessionID = "copy"
			cp, err := conversation.Import(ctx, fields, []conversation.SlotHistory{{Key: key, History: values(got)}}, pr.target("copy"), nil)
			require.NoError(t, err)
			assert.Equal(t, want, history(t, pr.plugin, cp))
			chat(t, pr.plugin, pr.storeOf("copy"), cp, "copy-q4")
			origNow, err := pr.load(t, orig.SessionID)
			require.NoError(t, err)
			assert.Equal(t, want, history(t, pr.plugin, origNow), "chatting on the copy changed the original")
		})
	}
	t.Run("a slot without a plugin", func(t *testing.T) {
		pr := r.pair(t, inMemory, fileStore)
		s := session.New()
		chat(t, pr.plugin, pr.storeOf(s.SessionID), s, "q1")
		var b bytes.Buffer
		_, err := conversation.Export(ctx, s, nil, &b)
		require.ErrorIs(t, err, conversation.ErrNoPlugin)
		assert.Zero(t, b.Len(), "a refused export wrote")
	})
}

// TestExportDuringAConcurrentChat: while a chat commits turn after turn
// on a session of the sqlite plugin, the session is loaded and exported
// again and again. Every export either fails with ErrChanged or gives one
// consistent revision: the history of exactly the document's revision
// (four messages a turn, a prefix of the final history), never the
// history of a later commit under an earlier revision, nor a torn one.
func TestExportDuringAConcurrentChat(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, pk := range []pluginKind{sqliteOnSQLite, sqliteOnPG} {
		t.Run(string(pk), func(t *testing.T) {
			pr := r.pair(t, pk, sqliteStore)
			s := session.New()
			id := s.SessionID
			chat(t, pr.plugin, pr.storeOf(id), s, "q0")

			const turns = 30
			done := make(chan error, 1)
			go func() {
				a, err := agent.New(agent.Config{Model: toolModel{}, Tools: []agent.Tool{lookup()},
					Providers: []agent.ProviderConfig{{Provider: pr.plugin.Provider(key)}}, Saver: pr.storeOf(id)})
				for i := 1; err == nil && i <= turns; i++ {
					_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, fmt.Sprint("q", i))}, nil)
				}
				done <- err
			}()

			type export struct {
				rev  int64
				msgs []abi.Message
			}
			var (
				exports []export
				changed int
				chatErr error
			)
			for running := true; running; {
				select {
				case chatErr = <-done:
					running = false
				default:
				}
				cur, err := pr.load(t, id)
				require.NoError(t, err)
				doc, err := exportDoc(ctx, cur, pr.plugin)
				if errors.Is(err, conversation.ErrChanged) {
					changed++
					continue
				}
				require.NoError(t, err)
				fields, msgs := readDoc(t, doc)
				exports = append(exports, export{fields.Revision, msgs})
			}
			require.NoError(t, chatErr)
			final, err := pr.load(t, id)
			require.NoError(t, err)
			all := history(t, pr.plugin, final)
			require.Len(t, all, 4*(turns+1))
			t.Logf("%d exports, %d refused as changed", len(exports), changed)
			require.NotEmpty(t, exports)
			for _, e := range exports {
				require.Equal(t, texts(all[:4*e.rev]), texts(e.msgs), "the export at revision %d holds another revision's history", e.rev)
			}
		})
	}
}

// lostSave is a session file whose save, staged with a run's commit,
// never completes: the databases commit, the file keeps the revision it
// had, as when the process ends between the two (host/internal/txn).
type lostSave struct{ *store.File }

func (l lostSave) PrepareSave(ctx context.Context, tx *txn.Txn, s *session.Session) (txn.Prepared, error) {
	p, err := l.File.PrepareSave(ctx, tx, s)
	if err != nil {
		return nil, err
	}
	return &txn.Staged{
		OnCommit: func(context.Context) error {
			p.Abort()
			return errors.New("the process ended before the session file was saved")
		},
		OnAbort: p.Abort,
	}, nil
}

// TestExportWhileTheStoreIsBehindItsJournal: a run committed in the
// plugin's database (its journal row holds the session at revision 2)
// while the session file stayed at revision 1. Exporting the session as
// the file holds it gives the newest committed revision, session and
// history alike, and writes nothing: the file and the database's rows
// are as they were, and the next chat brings the file up to date as it
// would have without the export.
func TestExportWhileTheStoreIsBehindItsJournal(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, pk := range []pluginKind{sqliteOnSQLite, sqliteOnPG} {
		t.Run(string(pk), func(t *testing.T) {
			pr := r.pair(t, pk, fileStore)
			s := session.New()
			id := s.SessionID
			file := pr.storeOf(id).(*store.File)
			chat(t, pr.plugin, file, s, "q1")
			chat(t, pr.plugin, lostSave{file}, s, "q2")
			want := history(t, pr.plugin, s)
			require.Len(t, want, 8)
			stored, err := pr.load(t, id)
			require.NoError(t, err)
			require.Equal(t, int64(1), stored.Revision, "the file was saved: the window is not reproduced")
			fileBefore, err := os.ReadFile(file.Path())
			require.NoError(t, err)
			heldBefore, err := pr.plugin.Provider(key).HeldRevisions(ctx, id)
			require.NoError(t, err)

			var b bytes.Buffer
			got, err := conversation.Export(ctx, stored, map[string]*host.Plugin{key: pr.plugin}, &b)
			require.NoError(t, err)
			assert.Equal(t, int64(2), got.Revision)
			fields, msgs := readDoc(t, b.Bytes())
			assert.Equal(t, int64(2), fields.Revision)
			assert.Equal(t, texts(want), texts(msgs))

			fileAfter, err := os.ReadFile(file.Path())
			require.NoError(t, err)
			assert.Equal(t, fileBefore, fileAfter, "the export wrote the session file")
			heldAfter, err := pr.plugin.Provider(key).HeldRevisions(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, heldBefore, heldAfter)
			assert.Equal(t, 8, pr.rows(t))

			// The next chat repairs the file and is refused as stale, as
			// without the export.
			a, err := agent.New(agent.Config{Model: toolModel{}, Tools: []agent.Tool{lookup()},
				Providers: []agent.ProviderConfig{{Provider: pr.plugin.Provider(key)}}, Saver: file})
			require.NoError(t, err)
			_, err = a.Run(ctx, stored, []abi.Message{abi.NewMessage(abi.RoleUser, "q3")}, nil)
			require.ErrorIs(t, err, session.ErrStaleRevision)
			repaired, err := pr.load(t, id)
			require.NoError(t, err)
			assert.Equal(t, int64(2), repaired.Revision)
		})
	}
}
