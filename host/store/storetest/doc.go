// Package storetest is the contract suite for session stores
// (store.Store, and store.Manager where a store implements
// it): the checks every store must pass, whatever keeps its data.
//
// From go test, Run runs every case as a subtest:
//
//	storetest.Run(t, func(t *testing.T) func(t *testing.T) store.Store {
//		path := filepath.Join(t.TempDir(), "sessions.db")
//		return func(t *testing.T) store.Store {
//			s, err := sqlitestore.Open(path)
//			require.NoError(t, err)
//			t.Cleanup(func() { s.Close() })
//			return s
//		}
//	})
//
// The factory prepares an empty database for one case and returns how to
// open it; every call of open must be a new handle on the same data, as
// another process would open it (its own connections, its own locks), so
// that the concurrent cases race handles and not only goroutines. The
// cases include two agents (package agent, with the offline model)
// taking turns on one session through the store, as two hosts would.
//
// Tools run the cases themselves: each Case.Run returns an error that says
// what the store did wrong.
package storetest
