package agent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// countingModel is echoModel counting its calls.
type countingModel struct {
	echoModel
	calls atomic.Int32
}

func (m *countingModel) Complete(ctx context.Context, req model.Request) (*model.Response, error) {
	m.calls.Add(1)
	return m.echoModel.Complete(ctx, req)
}

func runOnce(t *testing.T, p agent.HistoryProvider, m model.Client, s *session.Session, opts *agent.RunOptions) error {
	t.Helper()
	a, err := agent.New(agent.Config{Model: m, Providers: []agent.ProviderConfig{{Provider: p}}})
	require.NoError(t, err)
	_, err = a.Run(t.Context(), s, []abi.Message{abi.NewMessage(abi.RoleUser, "hi")}, opts)
	return err
}

// TestProvenanceOfAWebAssemblyPlugin: every commit records the plugin's
// name, version and sha256; the same build resumes; another sha256 is
// refused before any model call with an error saying both sums and how to
// proceed, and leaves the session as it was; AcceptNewBuild accepts it and
// records the new build; a slot with nothing stored is not refused.
func TestProvenanceOfAWebAssemblyPlugin(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/inmemory")), host.LoadOptions{})
	require.NoError(t, err)
	pr := p.Provider("history")
	m := &countingModel{}

	s := session.New()
	require.NoError(t, runOnce(t, pr, m, s, nil))
	want := session.Provenance{Plugin: p.Info().Name, Version: p.Info().Version, SHA256: p.SHA256()}
	require.Len(t, p.SHA256(), 64)
	assert.Equal(t, map[string]session.Provenance{"history": want}, s.Provenance, "after the first run")

	require.NoError(t, runOnce(t, pr, m, s, nil), "the same build resumes")
	assert.Equal(t, int64(2), s.Revision)
	require.Equal(t, int32(2), m.calls.Load())

	other := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	s.SetProvenance("history", session.Provenance{Plugin: want.Plugin, Version: want.Version, SHA256: other})
	before := s.Clone()
	err = runOnce(t, pr, m, s, nil)
	require.ErrorIs(t, err, agent.ErrProviderMismatch)
	var me *agent.ProviderMismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "sha256", me.Field)
	assert.Equal(t, "history", me.StateKey)
	assert.ErrorContains(t, err, other, "the recorded sum")
	assert.ErrorContains(t, err, p.SHA256(), "the current sum")
	assert.ErrorContains(t, err, "AcceptNewBuild", "how to proceed")
	assert.Equal(t, int32(2), m.calls.Load(), "a model call was made for a refused run")
	assert.Equal(t, before, s, "a refused run changed the session")

	require.NoError(t, runOnce(t, pr, m, s, &agent.RunOptions{AcceptNewBuild: true}), "upgrade")
	assert.Equal(t, want, s.Provenance["history"], "the upgrade records the new build")
	require.NoError(t, runOnce(t, pr, m, s, nil), "after the upgrade the new build resumes")

	empty := session.New()
	empty.SetProvenance("history", session.Provenance{Plugin: want.Plugin, SHA256: other})
	require.NoError(t, runOnce(t, pr, m, empty, nil), "a slot with nothing stored is not refused")
	assert.Equal(t, want, empty.Provenance["history"])
}

// TestProvenanceStorage: a plugin granted a database records it; resuming
// with another database that holds none of the session is refused, even
// with AcceptNewBuild, saying both databases; a session recorded without
// storage is refused with one too.
func TestProvenanceStorage(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	wasm := host.File(sdktest.BuildPlugin(t, "../../plugins/sqlite"))
	dir := t.TempDir()
	load := func(db string) *host.Plugin {
		p, err := h.Load(ctx, wasm, host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
		require.NoError(t, err)
		return p
	}
	x, y := filepath.Join(dir, "x.db"), filepath.Join(dir, "y.db")
	px, py := load(x), load(y)
	m := &countingModel{}

	s := session.New()
	require.NoError(t, runOnce(t, px.Provider("history"), m, s, nil))
	assert.Equal(t, "sqlite:"+x, s.Provenance["history"].Storage)
	assert.Equal(t, px.SHA256(), s.Provenance["history"].SHA256)
	require.NoError(t, runOnce(t, px.Provider("history"), m, s, nil), "the same database resumes")

	calls := m.calls.Load()
	for _, opts := range []*agent.RunOptions{nil, {AcceptNewBuild: true}} {
		before := s.Clone()
		err := runOnce(t, py.Provider("history"), m, s, opts)
		require.ErrorIs(t, err, agent.ErrProviderMismatch)
		var me *agent.ProviderMismatchError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, "database", me.Field)
		assert.Zero(t, me.Held, "y.db holds nothing of the session")
		assert.False(t, me.BuildChanged())
		assert.ErrorContains(t, err, "sqlite:"+x)
		assert.ErrorContains(t, err, "sqlite:"+y)
		assert.ErrorContains(t, err, "grant the database the session was used with")
		assert.Equal(t, before, s)
	}
	assert.Equal(t, calls, m.calls.Load(), "a model call was made for a refused run")

	s.SetProvenance("history", session.Provenance{Plugin: "sqlite", Version: px.Info().Version, SHA256: px.SHA256()})
	err = runOnce(t, px.Provider("history"), m, s, &agent.RunOptions{AcceptNewBuild: true})
	require.ErrorIs(t, err, agent.ErrProviderMismatch)
	assert.ErrorContains(t, err, "no storage")
}

// TestUpgradeRunsMigrateState: a new build whose state version changed is
// refused, then accepted with AcceptNewBuild, which migrates the slot
// through migrate_state once and records the new version; a provider
// without ProvenanceReporter records nothing.
func TestUpgradeRunsMigrateState(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	var migrated int
	plugin := func(version string, stateVersion int) *host.Plugin {
		info := abi.PluginInfo{Name: "versioned", Version: version, ABI: abi.Version, StateVersion: stateVersion,
			StateSchema:  json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`),
			InitialState: json.RawMessage(`{"n":0}`)}
		p, err := h.LoadNative(ctx, "versioned", func(_ context.Context, export string, in []byte) ([]byte, error) {
			switch export {
			case abi.ExportDescribe:
				return json.Marshal(info)
			case abi.ExportProvide:
				return []byte(`{}`), nil
			case abi.ExportStore:
				var req struct {
					State struct{ N int } `json:"state"`
				}
				if err := json.Unmarshal(in, &req); err != nil {
					return nil, err
				}
				return json.Marshal(map[string]any{"state": map[string]int{"n": req.State.N + 1}})
			case abi.ExportMigrateState:
				migrated++
				return []byte(`{"state":{"n":100}}`), nil
			}
			return nil, abi.Errorf(abi.CodeUnimplemented, "%s", export)
		}, host.LoadOptions{})
		require.NoError(t, err)
		return p
	}
	v1, v2 := plugin("1.0.0", 1), plugin("2.0.0", 2)
	m := &countingModel{}
	s := session.New()
	require.NoError(t, runOnce(t, v1.Provider("history"), m, s, nil))
	assert.Equal(t, session.Provenance{Plugin: "versioned", Version: "1.0.0"}, s.Provenance["history"], "a native plugin records no sha256")

	err = runOnce(t, v2.Provider("history"), m, s, nil)
	require.ErrorIs(t, err, agent.ErrProviderMismatch)
	assert.ErrorContains(t, err, `version 1.0.0 then, 2.0.0 now`)
	assert.ErrorContains(t, err, `2.0.0`)
	assert.Zero(t, migrated)

	require.NoError(t, runOnce(t, v2.Provider("history"), m, s, &agent.RunOptions{AcceptNewBuild: true}))
	assert.Equal(t, 1, migrated, "migrate_state calls")
	assert.Equal(t, 2, s.State["history"].StateVersion)
	assert.JSONEq(t, `{"n":101}`, string(s.State["history"].Data), "migrated, then stored")
	assert.Equal(t, "2.0.0", s.Provenance["history"].Version)

	native := session.New()
	require.NoError(t, runOnce(t, agent.NewMemoryProvider("history"), m, native, nil))
	assert.Nil(t, native.Provenance, "a provider without ProvenanceReporter records nothing")
}

// TestCloneOfADatabaseSessionIsRefused: a clone of a session whose history
// is in a plugin's database, given another id, would write into the
// original's rows; its run is refused before any model call, saying both
// ids, and the database keeps only the original's turns. A clone of a
// session whose history is in the session itself (the in-memory plugin) is
// a real copy and runs. A session recorded before the session id was
// recorded is adopted by its own id.
func TestCloneOfADatabaseSessionIsRefused(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	db := filepath.Join(t.TempDir(), "x.db")
	p, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/sqlite")), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	require.NoError(t, err)
	pr := p.Provider("history")
	m := &countingModel{}

	s := session.New()
	require.NoError(t, runOnce(t, pr, m, s, nil))
	assert.Equal(t, s.SessionID, s.Provenance["history"].Session, "the storage records whose rows it holds")
	rows := func(s *session.Session) int {
		msgs, _, err := p.List(ctx, s, "history", "", 100)
		require.NoError(t, err)
		return len(msgs)
	}
	require.Equal(t, 2, rows(s))

	clone := s.Clone()
	clone.SessionID = "copy"
	before := clone.Clone()
	calls := m.calls.Load()
	err = runOnce(t, pr, m, clone, &agent.RunOptions{AcceptNewBuild: true})
	require.ErrorIs(t, err, agent.ErrProviderMismatch)
	var me *agent.ProviderMismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "session", me.Field)
	assert.False(t, me.BuildChanged(), "AcceptNewBuild does not accept a copy")
	assert.ErrorContains(t, err, `"copy"`)
	assert.ErrorContains(t, err, `"`+s.SessionID+`"`)
	assert.ErrorContains(t, err, "conversation.Fork", "the advice names the way to a copy that runs")
	assert.Equal(t, before, clone, "a refused run changed the copy")
	assert.Equal(t, calls, m.calls.Load(), "a model call was made for a refused run")
	assert.Equal(t, 2, rows(s), "the refused copy wrote into the original's rows")

	require.NoError(t, runOnce(t, pr, m, s, nil), "the original goes on")
	assert.Equal(t, 4, rows(s))

	legacy := s.Clone()
	prov := legacy.Provenance["history"]
	prov.Session = ""
	legacy.SetProvenance("history", prov)
	require.NoError(t, runOnce(t, pr, m, legacy, nil), "a session recorded without its id")
	assert.Equal(t, s.SessionID, legacy.Provenance["history"].Session, "is adopted by its own id")

	mem, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/inmemory")), host.LoadOptions{})
	require.NoError(t, err)
	ms := session.New()
	require.NoError(t, runOnce(t, mem.Provider("history"), m, ms, nil))
	mc := ms.Clone()
	mc.SessionID = "memory-copy"
	require.NoError(t, runOnce(t, mem.Provider("history"), m, mc, nil), "a copy of a session that holds its own history runs")
}
