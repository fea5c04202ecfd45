package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// placeRig runs turns of one conversation kept in a directory: the
// session in s.json, its history in h.db through the sqlite plugin. Each
// turn runs in a host of its own, as a process would, so the database is
// closed between turns and its files can be copied like a user's backup.
type placeRig struct {
	wasm  string
	cache string
}

func (r *placeRig) turn(t *testing.T, dir, text string) (*session.Session, error) {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: r.cache})
	require.NoError(t, err)
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(r.wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "h.db")})}})
	require.NoError(t, err)
	return turnWith(t, p, store.NewFile(filepath.Join(dir, "s.json")), text)
}

// turnWith runs one turn of the session in f (a new one if f holds none)
// with p's history, saving it to f.
func turnWith(t *testing.T, p *host.Plugin, f *store.File, text string) (*session.Session, error) {
	t.Helper()
	ctx := context.Background()
	s, err := f.Load(ctx)
	if errors.Is(err, session.ErrNotFound) {
		s = session.New()
	} else {
		require.NoError(t, err)
	}
	a, err := agent.New(agent.Config{Model: echoModel{}, Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}}, Saver: f})
	require.NoError(t, err)
	_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
	return s, err
}

// history lists what h.db in dir holds for the session in s.json there.
func (r *placeRig) history(t *testing.T, dir string) []string {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: r.cache})
	require.NoError(t, err)
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(r.wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "h.db")})}})
	require.NoError(t, err)
	s, err := store.NewFile(filepath.Join(dir, "s.json")).Load(ctx)
	require.NoError(t, err)
	msgs, _, err := p.List(ctx, s, "history", "", 100)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		out = append(out, m.TextContent())
	}
	return out
}

// copyPlace copies the files of a conversation's directory (those named,
// or all) into dst, as cp or a restore from a backup would.
func copyPlace(t *testing.T, src, dst string, names ...string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dst, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		keep := len(names) == 0
		for _, n := range names {
			if matched, _ := filepath.Match(n, e.Name()); matched {
				keep = true
			}
		}
		if !keep || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
}

// TestStorageIdentifiedByContent: a session kept with its database resumes
// wherever the two are moved, copied or restored together; restoring only
// one of them, or pointing at a database that never held the session, is
// refused before any model call with advice naming which side is behind;
// a session store behind its database is brought up to date.
func TestStorageIdentifiedByContent(t *testing.T) {
	rig := &placeRig{wasm: sdktest.BuildPlugin(t, "../../plugins/sqlite"), cache: t.TempDir()}
	root := t.TempDir()
	at := func(name string) string { return filepath.Join(root, name) }
	two := []string{"one", "echo one", "two", "echo two"}

	_, err := rig.turn(t, at("a"), "one")
	require.NoError(t, err)
	s, err := rig.turn(t, at("a"), "two")
	require.NoError(t, err)
	require.EqualValues(t, 2, s.Revision)
	assert.EqualValues(t, 2, s.Provenance["history"].Revision, "the database holds the session's revision")
	copyPlace(t, at("a"), at("backup2"))

	t.Run("moved together", func(t *testing.T) {
		copyPlace(t, at("a"), at("moved"))
		s, err := rig.turn(t, at("moved"), "three")
		require.NoError(t, err)
		assert.EqualValues(t, 3, s.Revision)
		assert.Equal(t, "sqlite:"+filepath.Join(at("moved"), "h.db"), s.Provenance["history"].Storage, "the new place is recorded")
		assert.Equal(t, append(two, "three", "echo three"), rig.history(t, at("moved")))
		assert.Equal(t, two, rig.history(t, at("a")), "the original place is untouched")
	})

	s, err = rig.turn(t, at("a"), "three")
	require.NoError(t, err)
	require.EqualValues(t, 3, s.Revision)
	copyPlace(t, at("a"), at("backup3"))

	t.Run("both restored", func(t *testing.T) {
		copyPlace(t, at("backup2"), at("both"))
		s, err := rig.turn(t, at("both"), "again")
		require.NoError(t, err)
		assert.EqualValues(t, 3, s.Revision)
		assert.Equal(t, append(two, "again", "echo again"), rig.history(t, at("both")))
	})

	t.Run("only the database restored", func(t *testing.T) {
		copyPlace(t, at("backup3"), at("olddb"), "s.json")
		copyPlace(t, at("backup2"), at("olddb"), "h.db*")
		before, err := os.ReadFile(filepath.Join(at("olddb"), "s.json"))
		require.NoError(t, err)
		_, err = rig.turn(t, at("olddb"), "lost")
		require.ErrorIs(t, err, agent.ErrProviderMismatch)
		var me *agent.ProviderMismatchError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, "database", me.Field)
		assert.EqualValues(t, 2, me.Held, "the database is at revision 2")
		assert.EqualValues(t, 3, me.Recorded.Revision, "the session at 3")
		assert.ErrorContains(t, err, "restored from an older copy")
		after, err := os.ReadFile(filepath.Join(at("olddb"), "s.json"))
		require.NoError(t, err)
		assert.Equal(t, string(before), string(after), "a refused run changed the session")
		assert.Equal(t, two, rig.history(t, at("olddb")), "a refused run changed the database")
	})

	t.Run("only the session restored", func(t *testing.T) {
		copyPlace(t, at("backup3"), at("oldsession"), "h.db*")
		copyPlace(t, at("backup2"), at("oldsession"), "s.json")
		_, err := rig.turn(t, at("oldsession"), "four")
		require.ErrorIs(t, err, session.ErrStaleRevision, "the store behind its database is brought up to date")
		require.ErrorIs(t, err, session.ErrStoreRepaired, "the refusal says no one else committed")
		s, err := rig.turn(t, at("oldsession"), "four")
		require.NoError(t, err)
		assert.EqualValues(t, 4, s.Revision)
		assert.Equal(t, append(two, "three", "echo three", "four", "echo four"), rig.history(t, at("oldsession")))
	})

	t.Run("a database that never held the session", func(t *testing.T) {
		copyPlace(t, at("a"), at("fresh"), "s.json")
		_, err := rig.turn(t, at("fresh"), "lost")
		var me *agent.ProviderMismatchError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, "database", me.Field)
		assert.Zero(t, me.Held)
		assert.ErrorContains(t, err, "holds none of its history")
	})
}

// TestStorageIdentifiedByContentPostgres: on PostgreSQL the host's rows
// (the session row with the store in the same database, the journal with
// a session file) say which revision of the session the database holds;
// the same schemas under another grant name resume, a schema that never
// held the session is refused.
func TestStorageIdentifiedByContentPostgres(t *testing.T) {
	ctx := context.Background()
	dsn, h := postgresHost(t)
	wasm := sdktest.BuildPlugin(t, "../../plugins/sqlite")

	same := newPGCommitRig(t, h, wasm, dsn, 1, true)
	_, err := same.turn(t, "s", "one", "")
	require.NoError(t, err)
	held, err := same.plugin.Provider("history").HeldRevisions(ctx, "s")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"postgres:db1": 1}, held, "the session row in the same database")

	f := store.NewFile(filepath.Join(t.TempDir(), "s.json"))
	run := func(name, schema, hostSchema, text string) (*session.Session, error) {
		grant := pggrant.New(pggrant.Config{Name: name, AdminDSN: dsn, Schema: schema, HostSchema: hostSchema})
		p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{grant}})
		require.NoError(t, err)
		defer p.Close(ctx)
		return turnWith(t, p, f, text)
	}
	_, err = run("main", "data2", "host2", "one")
	require.NoError(t, err)
	s, err := run("main", "data2", "host2", "two")
	require.NoError(t, err)
	assert.EqualValues(t, 2, s.Provenance["history"].Revision)

	s, err = run("renamed", "data2", "host2", "three")
	require.NoError(t, err, "the same schemas under another grant name hold the session")
	assert.Equal(t, "postgres:renamed", s.Provenance["history"].Storage)
	assert.EqualValues(t, 3, s.Revision)

	_, err = run("fresh", "data3", "host3", "lost")
	var me *agent.ProviderMismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "database", me.Field)
	assert.Zero(t, me.Held, "a schema that never held the session")
}
