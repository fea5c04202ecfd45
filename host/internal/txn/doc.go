// Package txn is the commit protocol of a run: the run's transaction, how a
// plugin's database joins it, the host's rows written into it (the session
// row and the journal), the names of storage targets, and the order in which
// everything commits. Every other package takes part through what this one
// defines: the agent calls CommitSession, a session store implements
// Stager, a capability's connection implements Conn and Participant.
//
// # Where the Txn travels
//
// A run owns one Txn (agent's run.go). Where the host calls the host, it
// passes the Txn as an argument: to CommitSession, to a store's
// PrepareSave, to the command's delete. It crosses the plugin boundary in
// a context (With, From), and only there: the agent's call of an export
// runs guest code, which calls the sql capability's host functions; the
// only value wazero hands from the export call to those functions is the
// call's context, so the capability (capability.NewCall) finds the Txn
// there.
//
// # A run's commit, step by step
//
//  1. Every plugin call of the run carries the Txn, from the first
//     (provide while history loads) to the last store, and so do the
//     context providers' after-run hooks (agent.AfterRunner), called after
//     the stores and before step 3: a hook that fails is a failed run (2). The first call to
//     write to a database begins its transaction; the transaction joins
//     the Txn under the database's target (SQLiteTarget, PostgresTarget) if
//     the call left work to commit (Calls.End), and ends at once otherwise,
//     so a read holds no snapshot or lock across a model call. Each later
//     call runs inside a savepoint: a failed call undoes its own part only.
//     A transaction lost under a call (interrupt, I/O error, a plugin's
//     transaction control) fails the Txn: nothing of it can commit.
//  2. The run fails: Rollback rolls every joined transaction back. Nothing
//     of the run remains.
//  3. The run succeeds: CommitSession. With no database joined, the store
//     saves the session, and that save is the commit.
//  4. Otherwise the store stages the session (Stager.PrepareSave): a store
//     on a joined database writes the session row into that transaction
//     (Put, Sessions, with its revision check); any other store checks the
//     revision and holds a lock (the file store's directory lock and a
//     synced temporary file; a database store's write lock).
//  5. Every joined database the session row did not go into gets a journal
//     row: the new session, refused if the journal holds a revision not
//     lower (then repair, below).
//  6. The databases commit, in the order they joined (Commit). The first
//     COMMIT that succeeds is the run's commit point.
//  7. The staged store completes (rename; COMMIT). A failure here does not
//     fail the run: the databases hold it, journal included.
//
// # Failure windows that remain
//
//   - A crash between 6 and 7 leaves the session store behind its
//     databases. The next run's journal write (5) finds the newer row;
//     repair saves the journal's session into the store and refuses the run
//     as stale, to be run again. Deleting a session must therefore delete
//     its journal rows in the same transaction as its data.
//   - Several databases in one run commit one after the other (6), with no
//     atomic commit across them: a failure between two leaves the first
//     committed (CommitError names it) and the second without the run.
//   - A Saver that is not a Stager is saved before the databases commit: a
//     failure between the two leaves a session that records the run and a
//     database without its writes.
//   - The caller of a run a crash interrupted does not know its outcome; the
//     run id the session records with each commit (package session's
//     RunRecord) lets it repeat the run safely.
//
// Tests inject a fault at each Step (Store.Fault, set through the agent's
// export_test.go) and kill processes at random points of the protocol
// (host/agent's TestRunCommitsOnce, TestCommitUnderProcessKill).
package txn
