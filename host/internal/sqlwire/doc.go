// Package sqlwire is what the sql capability's backends (sqlcap on SQLite,
// pgcap on PostgreSQL) share of the wire: the limits of a request and the
// JSON framing of its results. It imports neither database driver, so that
// a program linking one backend does not link the other's.
package sqlwire
