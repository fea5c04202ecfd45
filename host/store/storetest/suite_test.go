package storetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/storetest"
)

// memStore is a reference store: correct unless one of its flaws is set.
// Handles opened on one memDB share its data, as handles on a database do.
type memStore struct {
	db    *memDB
	flaws flaws
}

type memDB struct {
	mu    sync.Mutex
	rows  map[string]memRow
	saves int
}

type memRow struct {
	data    []byte
	updated time.Time
}

type flaws struct {
	notFoundIsNil   bool // Load of a missing session returns nil, nil
	reindent        bool // the JSON is stored indented
	noRevisionCheck bool // last writer wins
	refuseNewer     bool // any save over a stored session is stale
	listUnsorted    bool // List in reverse id order
	deleteAnyRev    bool // Delete ignores the revision
	dropFifthSave   bool // the fifth save returns nil but writes nothing
	dropRecentRuns  bool // the recent runs are not stored
	foldCase        bool // ids differing only in case name one row
}

var _ store.Manager = (*memStore)(nil)

// key is the row of a session id.
func (m *memStore) key(id string) string {
	if m.flaws.foldCase {
		return strings.ToLower(id)
	}
	return id
}

func (m *memStore) Load(_ context.Context, id string) (*session.Session, error) {
	id = m.key(id)
	m.db.mu.Lock()
	row, ok := m.db.rows[id]
	m.db.mu.Unlock()
	if !ok {
		if m.flaws.notFoundIsNil {
			return nil, nil
		}
		return nil, fmt.Errorf("mem: %q: %w", id, session.ErrNotFound)
	}
	return session.Decode(row.data)
}

func (m *memStore) Save(_ context.Context, s *session.Session) error {
	if m.flaws.dropRecentRuns {
		c := *s
		c.RecentRuns = nil
		s = &c
	}
	data, err := session.Encode(s)
	if err != nil {
		return err
	}
	if m.flaws.reindent {
		data, _ = json.MarshalIndent(json.RawMessage(data), "", "  ")
	}
	check := func() error {
		row, ok := m.db.rows[m.key(s.SessionID)]
		if !ok || m.flaws.noRevisionCheck {
			return nil
		}
		old, err := session.Decode(row.data)
		if err != nil {
			return err
		}
		if old.Revision >= s.Revision || m.flaws.refuseNewer {
			return fmt.Errorf("mem: %w", session.ErrStaleRevision)
		}
		return nil
	}
	m.db.mu.Lock()
	defer m.db.mu.Unlock()
	if err := check(); err != nil {
		return err
	}
	if m.db.saves++; m.db.saves == 5 && m.flaws.dropFifthSave {
		return nil
	}
	m.db.rows[m.key(s.SessionID)] = memRow{data: data, updated: time.Now()}
	return nil
}

func (m *memStore) List(context.Context) ([]store.Info, error) {
	m.db.mu.Lock()
	defer m.db.mu.Unlock()
	var infos []store.Info
	for id, row := range m.db.rows {
		s, err := session.Decode(row.data)
		if err != nil {
			return nil, err
		}
		infos = append(infos, store.Info{SessionID: id, Revision: s.Revision, Updated: row.updated})
	}
	slices.SortFunc(infos, func(a, b store.Info) int { return strings.Compare(a.SessionID, b.SessionID) })
	if m.flaws.listUnsorted {
		slices.Reverse(infos)
	}
	return infos, nil
}

func (m *memStore) Delete(_ context.Context, id string, revision int64) error {
	m.db.mu.Lock()
	defer m.db.mu.Unlock()
	row, ok := m.db.rows[id]
	if !ok {
		return fmt.Errorf("mem: %w", session.ErrNotFound)
	}
	s, err := session.Decode(row.data)
	if err != nil {
		return err
	}
	if s.Revision != revision && !m.flaws.deleteAnyRev {
		return fmt.Errorf("mem: %w", session.ErrStaleRevision)
	}
	delete(m.db.rows, id)
	return nil
}

func memFactory(f flaws) storetest.Factory {
	return func(*testing.T) func(*testing.T) store.Store {
		db := &memDB{rows: map[string]memRow{}}
		return func(*testing.T) store.Store { return &memStore{db: db, flaws: f} }
	}
}

func TestReferenceStorePasses(t *testing.T) {
	storetest.Run(t, memFactory(flaws{}))
}

// Every case is paired with a flaw it must catch, so that a case that
// cannot fail does not pass unnoticed.
func TestEveryCaseCanFail(t *testing.T) {
	broken := map[string]flaws{
		"load_missing":           {notFoundIsNil: true},
		"round_trip":             {reindent: true},
		"stale_save_refused":     {noRevisionCheck: true},
		"next_revision_saved":    {refuseNewer: true},
		"list":                   {listUnsorted: true},
		"delete":                 {deleteAnyRev: true},
		"hammer":                 {dropFifthSave: true},
		"agents_alternate_turns": {refuseNewer: true},
		"racing_commits":         {noRevisionCheck: true},
		"run_ids_recognised":     {dropRecentRuns: true},
		"portable_ids":           {foldCase: true},
	}
	for _, c := range storetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			f, ok := broken[c.Name]
			require.True(t, ok, "case %q has no broken store to catch", c.Name)
			open := memFactory(f)(t)
			err := c.Run(t.Context(), func() store.Store { return open(t) })
			require.Error(t, err, "case %q passed against a broken store", c.Name)
			t.Log(err)
		})
	}
}
