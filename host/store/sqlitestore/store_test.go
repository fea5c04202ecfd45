package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/host/store/storetest"
)

func open(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// Each handle is a Store of its own on one file, with its own
// connections, as another process would have.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(*testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "sessions.db")
		return func(t *testing.T) store.Store { return open(t, path) }
	})
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// A row that is not a valid session is reported with the row and where
// in its JSON the problem is, not handed to the agent.
func TestCorruptRowReported(t *testing.T) {
	tests := []struct {
		name, data string
		revision   int64
		want       []string
	}{
		{name: "schema", revision: 1, data: `{"schema_version":1,"session_id":"bad","revision":1,"state":{"p":{"provider":"memory","state_version":1}}}`,
			want: []string{`row "bad"`, "/state/p", "data"}},
		{name: "not json", revision: 1, data: `{"schema_version":1,`, want: []string{`row "bad"`}},
		{name: "revision column disagrees", revision: 2, data: `{"schema_version":1,"session_id":"bad","revision":1}`,
			want: []string{`row "bad"`, "revision 2", "revision 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sessions.db")
			st := open(t, path)
			_, err := rawDB(t, path).Exec(`INSERT INTO wasmhist_sessions (id, revision, updated_us, data) VALUES ('bad', ?, 0, ?)`, tt.revision, tt.data)
			require.NoError(t, err)
			_, err = st.Load(context.Background(), "bad")
			require.ErrorIs(t, err, session.ErrInvalid)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestSaveRefusesInvalidSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	st := open(t, path)
	ctx := context.Background()
	for name, s := range map[string]*session.Session{
		"schema version 0": {SessionID: "x", Revision: 1},
		"empty id":         {SchemaVersion: session.SchemaVersion, Revision: 1},
	} {
		require.ErrorIs(t, st.Save(ctx, s), session.ErrInvalid, name)
	}
	infos, err := st.List(ctx)
	require.NoError(t, err)
	require.Empty(t, infos, "a refused session was stored")
}

// A database a later version migrated is refused rather than written in
// a layout that version no longer reads.
func TestOpenRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	open(t, path)
	_, err := rawDB(t, path).Exec(`UPDATE wasmhist_store_version SET version = 2`)
	require.NoError(t, err)
	_, err = sqlitestore.Open(path)
	require.ErrorContains(t, err, "version 2, newer than this program's 1")
}
