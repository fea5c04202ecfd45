package conversation_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// traces are the strings that identify a session in storage: its id and,
// for a plugin that keeps rows, the key of its slot's rows.
func traces(t testing.TB, s *session.Session) []string {
	t.Helper()
	out := []string{s.SessionID}
	var st struct {
		SessionKey string `json:"session_key"`
	}
	require.NoError(t, json.Unmarshal(s.State[key].Data, &st))
	if st.SessionKey != "" {
		out = append(out, st.SessionKey)
	}
	return out
}

// sqliteTraces returns "table: string" for every row of every table of
// the SQLite file at path (sqlite_schema lists them all, the host's and
// the plugins') with a column holding one of the strings.
func sqliteTraces(t testing.TB, path string, strs []string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_schema WHERE type = 'table'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, tables, "the database has tables")
	var found []string
	for _, tab := range tables {
		rows, err := db.Query(`SELECT * FROM "` + tab + `"`)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			for _, v := range vals {
				text := fmt.Sprint(v)
				if b, ok := v.([]byte); ok {
					text = string(b)
				}
				for _, s := range strs {
					if strings.Contains(text, s) {
						found = append(found, tab+": "+s)
					}
				}
			}
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return found
}

// pgTraces returns "schema.table: string" for every row of every table of
// every schema of the database (information_schema lists them: the
// host's, the session store's and each plugin's) whose text holds one of
// the strings.
func pgTraces(t testing.TB, dsn string, strs []string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	require.NoError(t, err)
	var tables []pgx.Identifier
	for rows.Next() {
		var sch, tab string
		require.NoError(t, rows.Scan(&sch, &tab))
		tables = append(tables, pgx.Identifier{sch, tab})
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, tables, "the database has tables")
	var found []string
	for _, tab := range tables {
		for _, s := range strs {
			var n int
			require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+tab.Sanitize()+` AS r WHERE strpos(r::text, $1) > 0`, s).Scan(&n))
			if n > 0 {
				found = append(found, strings.Join(tab, ".")+": "+s)
			}
		}
	}
	return found
}

// scan returns the traces of strs in every storage of the pairing: the
// SQLite file, and the PostgreSQL database when the test started one.
func (r *rig) scan(t testing.TB, pr *pairing, strs []string) []string {
	t.Helper()
	var found []string
	if _, err := sqlOpenable(pr.db); err == nil {
		found = append(found, sqliteTraces(t, pr.db, strs)...)
	}
	if r.pgDSN != "" {
		found = append(found, pgTraces(t, r.pgDSN, strs)...)
	}
	return found
}

// sqlOpenable reports whether path is a database file that exists.
func sqlOpenable(path string) (bool, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return false, err
	}
	defer db.Close()
	return true, db.Ping()
}

var managedStores = []storeKind{dirStore, sqliteStore, pgStore}

// TestEraseLeavesNoRow: for every plugin and every store that can delete,
// a session chatted with tool calls is erased next to a bystander
// session; afterwards no row of any table of the SQLite file
// (sqlite_schema) or of any schema of the PostgreSQL database
// (information_schema), the host's, the store's or the plugin's, holds the
// session's id or its slot's key, and the bystander is whole.
func TestEraseLeavesNoRow(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, pk := range pluginKinds {
		for _, sk := range managedStores {
			t.Run(string(pk)+"/"+string(sk), func(t *testing.T) {
				pr := r.pair(t, pk, sk)
				st := pr.storeOf("").(store.Manager)
				victim, bystander := session.New(), session.New()
				chat(t, pr.plugin, st, victim, "q1", "q2")
				chat(t, pr.plugin, st, bystander, "b1")
				want := history(t, pr.plugin, bystander)
				gone := traces(t, victim)
				if pk != inMemory || sk != dirStore { // that pairing keeps no database
					require.NotEmpty(t, r.scan(t, pr, gone), "before the erase the scan finds the session")
				}

				e, err := conversation.Erase(ctx, victim, map[string]*host.Plugin{key: pr.plugin}, st, nil)
				require.NoError(t, err)
				assert.Empty(t, r.scan(t, pr, gone), "rows of the erased session remain")
				if pk != inMemory || sk != dirStore {
					assert.NotEmpty(t, r.scan(t, pr, traces(t, bystander)), "the bystander's rows are found by the same scan")
				}
				assert.Equal(t, want, history(t, pr.plugin, bystander), "the bystander's history")
				_, err = st.Load(ctx, victim.SessionID)
				assert.ErrorIs(t, err, session.ErrNotFound)

				assert.Equal(t, victim.SessionID, e.SessionID)
				assert.Equal(t, victim.Revision, e.Revision)
				require.Len(t, e.Slots, 1)
				assert.Equal(t, conversation.ErasedSlot{Key: key, Plugin: pr.plugin.Info().Name, Storage: victim.Provenance[key].Storage}, e.Slots[0])
				if pk == inMemory {
					assert.Empty(t, e.Journals, "an in-memory slot writes no database")
				} else {
					assert.Equal(t, []string{victim.Provenance[key].Storage}, e.Journals)
				}
			})
		}
	}
}

// TestEraseRefusals: an erase that would lose a commit it has not seen, or
// leave a slot's rows, changes nothing.
func TestEraseRefusals(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	t.Run("stale", func(t *testing.T) {
		// A file store, so that the database's journal row is what
		// tells that a run committed after the session was read.
		pr := r.pair(t, sqliteOnSQLite, dirStore)
		st := pr.storeOf("").(store.Manager)
		s := session.New()
		chat(t, pr.plugin, st, s, "q1")
		old := s.Clone()
		chat(t, pr.plugin, st, s, "q2")
		_, err := conversation.Erase(ctx, old, map[string]*host.Plugin{key: pr.plugin}, st, nil)
		require.ErrorIs(t, err, session.ErrStaleRevision)
		assert.Len(t, history(t, pr.plugin, s), 8, "nothing was cleared")
		got, err := st.Load(ctx, s.SessionID)
		require.NoError(t, err)
		assert.Equal(t, s.Revision, got.Revision)
	})
	t.Run("no plugin", func(t *testing.T) {
		pr := r.pair(t, sqliteOnSQLite, sqliteStore)
		st := pr.storeOf("").(store.Manager)
		s := session.New()
		chat(t, pr.plugin, st, s, "q1")
		_, err := conversation.Erase(ctx, s, nil, st, nil)
		require.ErrorIs(t, err, conversation.ErrNoPlugin)
		assert.Len(t, history(t, pr.plugin, s), 4)
		_, err = st.Load(ctx, s.SessionID)
		require.NoError(t, err)
	})
}

// TestPrune: sessions last committed before the cutoff are erased with
// their rows; younger ones stay whole.
func TestPrune(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, sk := range []storeKind{sqliteStore, pgStore} {
		t.Run(string(sk), func(t *testing.T) {
			pk := sqliteOnSQLite
			if sk == pgStore {
				pk = sqliteOnPG
			}
			pr := r.pair(t, pk, sk)
			st := pr.storeOf("").(store.Manager)
			old1, old2, young := session.New(), session.New(), session.New()
			chat(t, pr.plugin, st, old1, "a")
			chat(t, pr.plugin, st, old2, "b")
			cutoff := time.Now()
			chat(t, pr.plugin, st, young, "c")
			want := history(t, pr.plugin, young)
			gone := append(traces(t, old1), traces(t, old2)...)

			erased, err := conversation.Prune(ctx, st, cutoff, conversation.Plugins{key: pr.plugin})
			require.NoError(t, err)
			var ids []string
			for _, e := range erased {
				ids = append(ids, e.SessionID)
			}
			assert.ElementsMatch(t, []string{old1.SessionID, old2.SessionID}, ids)
			assert.Empty(t, r.scan(t, pr, gone), "rows of pruned sessions remain")
			infos, err := st.List(ctx)
			require.NoError(t, err)
			require.Len(t, infos, 1)
			assert.Equal(t, young.SessionID, infos[0].SessionID)
			assert.Equal(t, want, history(t, pr.plugin, young))
		})
	}
}

// TestEraseLeave: EraseOptions.Leave decides about a slot Erase cannot
// clear. Refused, nothing changes; left, the session goes and what the
// slot's plugin stored stays, and Erased lists no slot or journal for it.
func TestEraseLeave(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	for _, leave := range []bool{false, true} {
		t.Run(fmt.Sprint("leave=", leave), func(t *testing.T) {
			pr := r.pair(t, sqliteOnSQLite, dirStore)
			st := pr.storeOf("").(store.Manager)
			s := session.New()
			chat(t, pr.plugin, st, s, "q1")
			var asked []conversation.Uncleared
			e, err := conversation.Erase(ctx, s, nil, st, &conversation.EraseOptions{Leave: func(u conversation.Uncleared) bool {
				asked = append(asked, u)
				return leave
			}})
			require.Len(t, asked, 1)
			assert.Equal(t, key, asked[0].Key)
			assert.Equal(t, s.Provenance[key].Storage, asked[0].Storage)
			assert.ErrorIs(t, asked[0].Err, conversation.ErrNoPlugin)
			assert.Len(t, history(t, pr.plugin, s), 4, "the slot's rows stay")
			_, lerr := st.Load(ctx, s.SessionID)
			if !leave {
				require.ErrorIs(t, err, conversation.ErrNoPlugin)
				require.NoError(t, lerr, "a refused erase deleted the session")
				return
			}
			require.NoError(t, err)
			assert.Empty(t, e.Slots)
			assert.Empty(t, e.Journals)
			assert.ErrorIs(t, lerr, session.ErrNotFound)
		})
	}
}
