package storetest

import (
	"context"
	"testing"

	"github.com/wasmhist/wasmhist/host/store"
)

// Factory prepares an empty database for one test and returns how to
// open it. Each call of open returns a new handle on the same data.
type Factory func(t *testing.T) (open func(t *testing.T) store.Store)

// Case is one contract check. Run gets handles on one empty database from
// open and returns an error that says what the store did wrong.
type Case struct {
	// Name identifies the case, e.g. "stale_save_refused".
	Name string
	// Doc says in one sentence what a conforming store does.
	Doc string
	Run func(ctx context.Context, open func() store.Store) error
}

// Cases returns the contract suite, in the order it runs. Cases about
// List and Delete fail for a store that does not implement
// store.Manager.
func Cases() []Case {
	return []Case{
		{Name: "load_missing", Doc: "loading a session the store does not hold fails with session.ErrNotFound", Run: caseLoadMissing},
		{Name: "round_trip", Doc: "a saved session loads back equal (its provenance included), from the same handle and from another, with each state slot's raw JSON byte for byte", Run: caseRoundTrip},
		{Name: "stale_save_refused", Doc: "a save whose revision is not above the stored one fails with session.ErrStaleRevision and changes nothing", Run: caseStaleSave},
		{Name: "next_revision_saved", Doc: "a save of a higher revision than the stored one replaces it", Run: caseNextRevision},
		{Name: "list", Doc: "List returns every stored session once, ordered by id, with its stored revision and when it was saved", Run: caseList},
		{Name: "delete", Doc: "Delete removes a session only at its stored revision (else session.ErrStaleRevision), and a missing one is session.ErrNotFound", Run: caseDelete},
		{Name: "hammer", Doc: "writers on separate handles that load, change and save one session, retrying stale saves, lose no save that succeeded", Run: caseHammer},
		{Name: "agents_alternate_turns", Doc: "two agents with their own handles take turns on one session, each seeing the other's turns", Run: caseAgentsAlternate},
		{Name: "run_ids_recognised", Doc: "a run repeated with one of the session's last session.MaxRecentRuns run ids returns its recorded reply and changes nothing, the same id with another input is refused with agent.ErrRunIDReused, and an id older than the window runs again", Run: caseRunIDsRecognised},
		{Name: "portable_ids", Doc: "every id store.CheckID accepts names a session of its own (ids differing only in case too): LoadOrNew creates it at revision 0, it saves and loads back, and a second creation is stale", Run: casePortableIDs},
		{Name: "racing_commits", Doc: "of two agents committing the same loaded revision at once, exactly one wins; the other gets session.ErrStaleRevision and the store keeps the winner's session", Run: caseRacingCommits},
	}
}

// Run runs every case as a subtest of t, each on a database of its own
// from f.
func Run(t *testing.T, f Factory) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			open := f(t)
			if err := c.Run(t.Context(), func() store.Store { return open(t) }); err != nil {
				t.Fatalf("%s: %v", c.Doc, err)
			}
		})
	}
}
