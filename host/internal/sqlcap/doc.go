// Package sqlcap implements the sql host capability: plugins run
// parameterised SQL against SQLite databases that the host owns, one file per
// grant chosen by the operator, never by the plugin.
//
// Isolation rests on SQLite's authorizer, not on inspecting SQL text: while a
// plugin's statement is prepared or run, the connection's authorizer refuses
// ATTACH and DETACH, transaction control, temporary objects, PRAGMAs outside a
// short list, extension loading and the raw-page virtual tables, so a plugin
// reaches only the main schema of its own database. Every request is bounded
// in rows, bytes and time; a statement that runs too long is interrupted.
//
// All requests of one export call share one transaction: Grant.Begin takes a
// connection, the first request opens the transaction, and Session.End
// commits it when the export call succeeded and rolls it back otherwise. An
// export call that returned successfully has therefore committed, durably
// with the default synchronous=FULL.
package sqlcap
