// Package conversation treats a conversation as one object: a session
// together with the history its plugins keep for it, in whatever storage.
// Import writes a session and its history into any conformant plugin and
// any session store, all or nothing; Fork makes a new, independent session
// holding the history of another up to a turn, in the same or another
// plugin and store. The history streams in (iter.Seq2), so a portable
// document read by package host/portable's Reader, or another plugin's
// list pages, feed it page by page.
package conversation
