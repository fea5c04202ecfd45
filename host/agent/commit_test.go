package agent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// commitRig is an agent whose sqlite plugin writes to db, saving sessions
// into store.
type commitRig struct {
	agent  *agent.Agent
	store  store.Store
	db     string
	model  *switchModel
	plugin *host.Plugin
	// rowsOf, when set, reads the plugin's rows instead of the SQLite
	// file db.
	rowsOf func(t testing.TB) []string
}

// switchModel echoes, or fails while fail is set.
type switchModel struct {
	echoModel
	fail bool
}

func (m *switchModel) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	if m.fail {
		return nil, errors.New("model down")
	}
	return m.echoModel.Complete(ctx, req)
}

// storeKinds are the session stores a run commits through, with the plugin
// database: a file next to it, the plugin's own database, another
// database.
var storeKinds = []struct {
	name string
	open func(t testing.TB, dir, db string) store.Store
}{
	{"file", func(t testing.TB, dir, _ string) store.Store {
		s, err := store.NewDir(filepath.Join(dir, "sessions"))
		require.NoError(t, err)
		return s
	}},
	{"sqlite-same-db", func(t testing.TB, _, db string) store.Store {
		s, err := sqlitestore.Open(db)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"sqlite-other-db", func(t testing.TB, dir, _ string) store.Store {
		s, err := sqlitestore.Open(filepath.Join(dir, "sessions.db"))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

func newCommitRig(t testing.TB, h *host.Host, wasm string, open func(t testing.TB, dir, db string) store.Store) *commitRig {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "history.db")
	p, err := h.Load(context.Background(), host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	rig := &commitRig{store: open(t, dir, db), db: db, model: &switchModel{}, plugin: p}
	rig.agent, err = agent.New(agent.Config{
		Model:     rig.model,
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
		Saver:     rig.store,
	})
	require.NoError(t, err)
	return rig
}

// turn runs one line on the stored session (a new one if none is stored).
func (rig *commitRig) turn(t testing.TB, id, line, runID string) (*agent.RunResult, error) {
	t.Helper()
	s, err := rig.store.Load(context.Background(), id)
	if errors.Is(err, session.ErrNotFound) {
		s, err = session.New(), nil
		s.SessionID = id
	}
	require.NoError(t, err)
	return rig.agent.Run(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, line)}, &agent.RunOptions{RunID: runID})
}

// rows returns the texts of every stored message in the plugin's database,
// in the order stored, whatever session key they are under.
func (rig *commitRig) rows(t testing.TB) []string {
	t.Helper()
	if rig.rowsOf != nil {
		return rig.rowsOf(t)
	}
	db, err := sql.Open("sqlite", "file:"+rig.db+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rs, err := db.Query(`SELECT body FROM messages ORDER BY rowid`)
	require.NoError(t, err)
	defer rs.Close()
	var out []string
	for rs.Next() {
		var body string
		require.NoError(t, rs.Scan(&body))
		var m abi.Message
		err := json.Unmarshal([]byte(body), &m)
		require.NoError(t, err)
		out = append(out, string(m.Role)+":"+m.TextContent())
	}
	require.NoError(t, rs.Err())
	var ok string
	require.NoError(t, db.QueryRow(`PRAGMA integrity_check`).Scan(&ok))
	require.Equal(t, "ok", ok)
	return out
}

// history is what the session's provider serves now, read through the
// stored session.
func (rig *commitRig) revision(t testing.TB, id string) int64 {
	t.Helper()
	s, err := rig.store.Load(context.Background(), id)
	require.NoError(t, err)
	return s.Revision
}

// TestRunCommitsOnce injects a failure at every step of a run's commit, for
// every kind of session store, and checks the promise: a run that fails
// before its commit point leaves the session and the plugin's database as
// they were, one that fails after it is committed in both (the session
// store, if it lagged, is brought up to date by the next run), and a retry
// with the same RunID stores the turn exactly once.
func TestRunCommitsOnce(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")

	for _, kind := range storeKinds {
		for _, fault := range commitFaults {
			t.Run(kind.name+"/"+string(fault), func(t *testing.T) {
				checkFault(t, newCommitRig(t, h, wasm, kind.open), fault)
			})
		}
	}
}

// commitFaults are the points TestRunCommitsOnce breaks a commit at.
var commitFaults = []txn.Step{
	txn.StepBeforeSessionSave, txn.StepAfterSessionSave, txn.StepBeforeSQLCommit,
	txn.StepAfterSQLCommit, txn.StepBeforeSessionDone, txn.StepAfterSessionDone,
	"model", // the model call fails: nothing reaches the commit
}

// checkFault runs a turn, then a second one failing at fault, checks the
// database and the session, and repeats the second turn with its run id
// until acknowledged: the turn is then stored exactly once.
func checkFault(t *testing.T, rig *commitRig, fault txn.Step) {
	before := []string{"user:one", "assistant:echo one"}
	after := append(before, "user:two", "assistant:echo two")
	_, err := rig.turn(t, "s", "one", "run-1")
	require.NoError(t, err)
	require.Equal(t, before, rig.rows(t))

	var res *agent.RunResult
	if fault == "model" {
		rig.model.fail = true
		res, err = rig.turn(t, "s", "two", "run-2")
		rig.model.fail = false
	} else {
		agent.SetCommitFault(rig.agent, func(step txn.Step) error {
			if step == fault {
				return errors.New("crash")
			}
			return nil
		})
		res, err = rig.turn(t, "s", "two", "run-2")
		agent.SetCommitFault(rig.agent, nil)
	}
	// The commit point is the database's COMMIT (the session
	// row's too, in the same-database store).
	committed := fault == txn.StepAfterSQLCommit || fault == txn.StepBeforeSessionDone || fault == txn.StepAfterSessionDone
	if committed {
		require.Equal(t, after, rig.rows(t), "the database after a fault past the commit point")
	} else {
		require.Error(t, err)
		require.Nil(t, res)
		require.Equal(t, before, rig.rows(t), "the database after a fault before the commit point")
		require.EqualValues(t, 1, rig.revision(t, "s"), "the session after a fault before the commit point")
	}

	// The caller does not know the outcome, and repeats the run
	// with its RunID until it is acknowledged.
	var acked *agent.RunResult
	for attempt := 0; attempt < 3 && acked == nil; attempt++ {
		res, err := rig.turn(t, "s", "two", "run-2")
		if errors.Is(err, session.ErrStaleRevision) {
			continue // the store was brought up to date: run again
		}
		require.NoError(t, err)
		acked = res
	}
	require.NotNil(t, acked, "the retry was never acknowledged")
	assert.Equal(t, committed, acked.Replayed, "the retry found the run committed")
	assert.Equal(t, "echo two", acked.Text(), "the retry returns the run's reply")
	require.Equal(t, after, rig.rows(t), "the database after the retry: the turn exactly once")
	require.EqualValues(t, 2, rig.revision(t, "s"), "the session after the retry")

	// And the conversation goes on from there.
	_, err = rig.turn(t, "s", "three", "run-3")
	require.NoError(t, err)
	require.Equal(t, append(after, "user:three", "assistant:echo three"), rig.rows(t))
	require.EqualValues(t, 3, rig.revision(t, "s"))
}

// TestStaleRunLeavesNoRows: two runs that loaded the same revision race;
// the loser is refused and none of its plugin writes remain, whatever the
// session store.
func TestStaleRunLeavesNoRows(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			rig := newCommitRig(t, h, wasm, kind.open)
			_, err := rig.turn(t, "s", "one", "")
			require.NoError(t, err)
			stale, err := rig.store.Load(ctx, "s")
			require.NoError(t, err)
			_, err = rig.turn(t, "s", "two", "")
			require.NoError(t, err)
			_, err = rig.agent.Run(ctx, stale, []abi.Message{abi.NewMessage(abi.RoleUser, "lost")}, nil)
			require.ErrorIs(t, err, session.ErrStaleRevision)
			require.NotErrorIs(t, err, session.ErrStoreRepaired, "another run committed: the store was not behind")
			require.Equal(t, []string{"user:one", "assistant:echo one", "user:two", "assistant:echo two"}, rig.rows(t))
			require.EqualValues(t, 2, rig.revision(t, "s"))
		})
	}
}
