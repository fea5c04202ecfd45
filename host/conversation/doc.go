// Package conversation treats a conversation as one object: a session
// together with the history its plugins keep for it, in whatever storage.
// Import writes a session and its history into any conformant plugin and
// any session store, all or nothing; Fork makes a new, independent session
// holding the history of another up to a turn, in the same or another
// plugin and store. Erase deletes a session with every row its plugins
// and the host keep for it; Prune erases the sessions last committed
// before a time; Migrate copies every session of a store, with its
// history, into another store and plugins (SQLite to PostgreSQL), each
// session all or nothing, resumable by running it again. The history streams in (iter.Seq2), so a portable
// document read by package host/portable's Reader, or another plugin's
// list pages, feed it page by page.
package conversation
