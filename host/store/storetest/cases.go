package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/host/session"
)

// rawSlot is compact JSON that any re-encoding would change: keys out of
// order, a number with a trailing zero and one in exponent form, an
// escaped character and an empty object and array.
const rawSlot = `{"z":1,"a":[1.50,2e3,"\u00e9"],"m":{},"e":[]}`

func newSession(id string, revision int64, note string) *session.Session {
	return &session.Session{
		SchemaVersion:    session.SchemaVersion,
		SessionID:        id,
		ServiceSessionID: "conv-" + id,
		Revision:         revision,
		State: map[string]session.ProviderState{
			"history": {Provider: "memory", StateVersion: 1, Data: json.RawMessage(rawSlot)},
			"note":    {Provider: "note", StateVersion: 3, Data: json.RawMessage(fmt.Sprintf(`{"note":%q}`, note))},
		},
		PendingToolCalls: []session.PendingToolCall{{
			CallID: "c1", Name: "clock", Arguments: json.RawMessage(`{"tz":"UTC"}`), Done: true, Result: json.RawMessage(`{"time":"12:00"}`),
		}},
		// Where each slot's history is (agent.ProvenanceReporter): a store
		// must keep it as it keeps the slots.
		Provenance: map[string]session.Provenance{
			"history": {Plugin: "memory", Version: "1.2.3", SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Storage: "sqlite:/var/lib/wasmhist/" + id + ".db"},
			"note":    {Plugin: "note", Storage: "postgres:notes"},
		},
	}
}

// same reports how got differs from want, comparing the encoded sessions
// and each slot's raw bytes.
func same(want, got *session.Session) error {
	if got == nil {
		return errors.New("loaded a nil session")
	}
	w, err := json.Marshal(want)
	if err != nil {
		return err
	}
	g, err := json.Marshal(got)
	if err != nil {
		return err
	}
	if !bytes.Equal(w, g) {
		return fmt.Errorf("loaded session differs:\nwant %s\ngot  %s", w, g)
	}
	for k, ps := range want.State {
		if !bytes.Equal(ps.Data, got.State[k].Data) {
			return fmt.Errorf("state slot %q: want raw bytes %s, got %s", k, ps.Data, got.State[k].Data)
		}
	}
	return nil
}

func caseLoadMissing(ctx context.Context, open func() store.Store) error {
	st := open()
	s, err := st.Load(ctx, "absent")
	if !errors.Is(err, session.ErrNotFound) {
		return fmt.Errorf("load of a missing session: want session.ErrNotFound, got session %v, error %v", s, err)
	}
	return nil
}

func caseRoundTrip(ctx context.Context, open func() store.Store) error {
	st, other := open(), open()
	want := newSession("round-trip", 1, "first")
	if err := st.Save(ctx, want); err != nil {
		return fmt.Errorf("save: %w", err)
	}
	for name, h := range map[string]store.Store{"the saving handle": st, "another handle": other} {
		got, err := h.Load(ctx, want.SessionID)
		if err != nil {
			return fmt.Errorf("load from %s: %w", name, err)
		}
		if err := same(want, got); err != nil {
			return fmt.Errorf("load from %s: %w", name, err)
		}
	}
	return nil
}

func caseStaleSave(ctx context.Context, open func() store.Store) error {
	st := open()
	first := newSession("stale", 2, "first")
	if err := st.Save(ctx, first); err != nil {
		return fmt.Errorf("save at revision 2: %w", err)
	}
	for _, rev := range []int64{2, 1, 0} {
		if err := st.Save(ctx, newSession("stale", rev, "stale")); !errors.Is(err, session.ErrStaleRevision) {
			return fmt.Errorf("save at revision %d over stored revision 2: want session.ErrStaleRevision, got %v", rev, err)
		}
	}
	got, err := st.Load(ctx, "stale")
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if err := same(first, got); err != nil {
		return fmt.Errorf("after refused saves: %w", err)
	}
	return nil
}

func caseNextRevision(ctx context.Context, open func() store.Store) error {
	st := open()
	for rev := int64(1); rev <= 3; rev++ {
		want := newSession("next", rev, fmt.Sprint("note ", rev))
		if err := st.Save(ctx, want); err != nil {
			return fmt.Errorf("save at revision %d over %d: %w", rev, rev-1, err)
		}
		got, err := st.Load(ctx, "next")
		if err != nil {
			return fmt.Errorf("load at revision %d: %w", rev, err)
		}
		if err := same(want, got); err != nil {
			return fmt.Errorf("at revision %d: %w", rev, err)
		}
	}
	// Revisions need not be consecutive: the check is "newer", not "next".
	if err := st.Save(ctx, newSession("next", 7, "skipped ahead")); err != nil {
		return fmt.Errorf("save at revision 7 over 3: %w", err)
	}
	return nil
}

func manager(st store.Store) (store.Manager, error) {
	m, ok := st.(store.Manager)
	if !ok {
		return nil, fmt.Errorf("%T does not implement store.Manager", st)
	}
	return m, nil
}

func caseList(ctx context.Context, open func() store.Store) error {
	m, err := manager(open())
	if err != nil {
		return err
	}
	infos, err := m.List(ctx)
	if err != nil {
		return fmt.Errorf("list of an empty store: %w", err)
	}
	if len(infos) != 0 {
		return fmt.Errorf("list of an empty store: got %v", infos)
	}
	// The clock may be a database server's: allow for a little skew.
	before := time.Now().Add(-time.Minute)
	for _, s := range []*session.Session{newSession("b", 1, ""), newSession("c", 5, ""), newSession("a", 2, ""), newSession("b", 3, "")} {
		if err := m.Save(ctx, s); err != nil {
			return fmt.Errorf("save %q at revision %d: %w", s.SessionID, s.Revision, err)
		}
	}
	after := time.Now().Add(time.Minute)
	infos, err = m.List(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	var got []string
	for _, in := range infos {
		got = append(got, fmt.Sprintf("%s@%d", in.SessionID, in.Revision))
		if in.Updated.Before(before) || in.Updated.After(after) {
			return fmt.Errorf("list: %q was updated at %v, not between %v and %v", in.SessionID, in.Updated, before, after)
		}
	}
	if want := []string{"a@2", "b@3", "c@5"}; !slices.Equal(want, got) {
		return fmt.Errorf("list: want %v, got %v", want, got)
	}
	return nil
}

func caseDelete(ctx context.Context, open func() store.Store) error {
	m, err := manager(open())
	if err != nil {
		return err
	}
	if err := m.Save(ctx, newSession("doomed", 3, "")); err != nil {
		return fmt.Errorf("save: %w", err)
	}
	if err := m.Save(ctx, newSession("kept", 1, "")); err != nil {
		return fmt.Errorf("save: %w", err)
	}
	for _, rev := range []int64{2, 4} {
		if err := m.Delete(ctx, "doomed", rev); !errors.Is(err, session.ErrStaleRevision) {
			return fmt.Errorf("delete at revision %d of stored revision 3: want session.ErrStaleRevision, got %v", rev, err)
		}
		if _, err := m.Load(ctx, "doomed"); err != nil {
			return fmt.Errorf("load after a refused Delete: %w", err)
		}
	}
	if err := m.Delete(ctx, "doomed", 3); err != nil {
		return fmt.Errorf("delete at the stored revision: %w", err)
	}
	if _, err := m.Load(ctx, "doomed"); !errors.Is(err, session.ErrNotFound) {
		return fmt.Errorf("load after Delete: want session.ErrNotFound, got %v", err)
	}
	for _, id := range []string{"doomed", "absent"} {
		if err := m.Delete(ctx, id, 3); !errors.Is(err, session.ErrNotFound) {
			return fmt.Errorf("delete of missing %q: want session.ErrNotFound, got %v", id, err)
		}
	}
	infos, err := m.List(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if len(infos) != 1 || infos[0].SessionID != "kept" {
		return fmt.Errorf("list after Delete: want only \"kept\", got %v", infos)
	}
	// A deleted id starts again from any revision.
	if err := m.Save(ctx, newSession("doomed", 1, "again")); err != nil {
		return fmt.Errorf("save after Delete: %w", err)
	}
	return nil
}

// Hammer sizes: every writer commits rounds times, so a lost update shows
// as a missing mark and a revision below writers*rounds.
const (
	hammerWriters = 8
	hammerRounds  = 10
	// hammerAttempts bounds each writer's saves, successful or stale, so
	// a store that never accepts a save fails instead of hanging.
	hammerAttempts = hammerRounds * hammerWriters * 20
)

func caseHammer(ctx context.Context, open func() store.Store) error {
	const id = "hammer"
	seed := open()
	if err := seed.Save(ctx, marked(id, 0, nil)); err != nil {
		return fmt.Errorf("save of the seed: %w", err)
	}
	handles := make([]store.Store, hammerWriters)
	for i := range handles {
		handles[i] = open()
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		saved    []string // the mark of every save that returned nil
		failures []error
	)
	for w, st := range handles {
		wg.Go(func() {
			fail := func(err error) {
				mu.Lock()
				failures = append(failures, fmt.Errorf("writer %d: %w", w, err))
				mu.Unlock()
			}
			done, attempts := 0, 0
			for done < hammerRounds {
				if attempts++; attempts > hammerAttempts {
					fail(fmt.Errorf("%d saves in %d attempts", done, hammerAttempts))
					return
				}
				s, err := st.Load(ctx, id)
				if err != nil {
					fail(fmt.Errorf("load: %w", err))
					return
				}
				var marks []string
				if err := json.Unmarshal(s.State["marks"].Data, &marks); err != nil {
					fail(fmt.Errorf("revision %d: marks: %w", s.Revision, err))
					return
				}
				mark := fmt.Sprintf("w%d.%d", w, done)
				err = st.Save(ctx, marked(id, s.Revision+1, append(marks, mark)))
				switch {
				case errors.Is(err, session.ErrStaleRevision):
					continue
				case err != nil:
					fail(fmt.Errorf("save: %w", err))
					return
				}
				done++
				mu.Lock()
				saved = append(saved, mark)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		return errors.Join(failures...)
	}
	final, err := seed.Load(ctx, id)
	if err != nil {
		return fmt.Errorf("load of the result: %w", err)
	}
	if final.Revision != int64(len(saved)) {
		return fmt.Errorf("%d saves returned nil, but the stored revision is %d", len(saved), final.Revision)
	}
	var marks []string
	if err := json.Unmarshal(final.State["marks"].Data, &marks); err != nil {
		return fmt.Errorf("marks: %w", err)
	}
	slices.Sort(marks)
	slices.Sort(saved)
	if !slices.Equal(saved, marks) {
		return fmt.Errorf("the stored session does not reflect every successful save:\nsaved  %v\nstored %v", saved, marks)
	}
	return nil
}

func marked(id string, revision int64, marks []string) *session.Session {
	if marks == nil {
		marks = []string{}
	}
	data, _ := json.Marshal(marks)
	return &session.Session{
		SchemaVersion: session.SchemaVersion,
		SessionID:     id,
		Revision:      revision,
		State:         map[string]session.ProviderState{"marks": {Provider: "hammer", StateVersion: 1, Data: data}},
	}
}

// portableIDs are ids store.CheckID accepts, each of a kind a service
// uses: a user id, an e-mail address, a UUID, text in several scripts,
// the longest id, and two that differ only in case.
var portableIDs = []string{
	"user-42",
	"ann@example.com",
	"3f2c9a1e-8b7d-4c6e-9f0a-1b2c3d4e5f60",
	"Zoë 名前 مرحبا",
	"with space and 'quotes' \"too\"",
	strings.Repeat("x", store.MaxIDBytes),
	"Ann",
	"ann",
}

func casePortableIDs(ctx context.Context, open func() store.Store) error {
	st, other := open(), open()
	for _, id := range portableIDs {
		if err := store.CheckID(id); err != nil {
			return fmt.Errorf("the suite's own id: %w", err)
		}
		s, err := store.LoadOrNew(ctx, st, id)
		if err != nil {
			return fmt.Errorf("LoadOrNew %q on an empty store: %w", id, err)
		}
		if s.SessionID != id || s.Revision != 0 {
			return fmt.Errorf("LoadOrNew %q on an empty store: want a new session %q at revision 0, got %q at revision %d", id, id, s.SessionID, s.Revision)
		}
		want := newSession(id, 1, "note of "+id)
		if err := st.Save(ctx, want); err != nil {
			return fmt.Errorf("save new session %q: %w", id, err)
		}
		got, err := store.LoadOrNew(ctx, other, id)
		if err != nil {
			return fmt.Errorf("LoadOrNew %q after its save: %w", id, err)
		}
		if err := same(want, got); err != nil {
			return fmt.Errorf("LoadOrNew %q after its save: %w", id, err)
		}
		if err := other.Save(ctx, newSession(id, 1, "created twice")); !errors.Is(err, session.ErrStaleRevision) {
			return fmt.Errorf("a second new session %q saved at revision 1: want session.ErrStaleRevision, got %v", id, err)
		}
	}
	return nil
}
