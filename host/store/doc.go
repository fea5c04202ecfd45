// Package store keeps agent sessions: the contract every session store
// meets (Saver, Store, Manager) and the stores on files, Dir for a
// directory of session files and File for one file. The stores on
// databases are in sqlitestore and pgstore; storetest is the contract suite
// every store passes.
//
// A store refuses a save whose stored copy has the same or a newer
// revision (session.ErrStaleRevision), so of two writers that loaded one
// revision the second loses instead of overwriting the first. The stores of
// this package and its subpackages also take part in a run's commit with
// the plugins' databases (see host/agent/persistence.md); a Saver written
// elsewhere is saved before those databases commit.
//
// LoadOrNew loads a session by id or starts a new one under that id, in
// any store; CheckID says which ids every store accepts, so that a
// conversation keeps its id when it moves between stores.
//
// The database stores are packages of their own, so that a program links
// only the driver of the store it chooses: the agent depends on this
// package, which needs none.
package store
