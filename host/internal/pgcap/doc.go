// Package pgcap implements the sql host capability on PostgreSQL: plugins
// run parameterised SQL in a schema of their own of a database the host
// owns, chosen by the operator, never by the plugin.
//
// Isolation rests on PostgreSQL's own privileges, never on inspecting SQL
// text. Per grant (and tenant) the host provisions, through an admin
// connection, a role that logs in with a password derived from a host key
// (HMAC), inherits nothing, is a member of no role and owns only its
// schema, which is its search_path. The plugin's statements run on
// connections authenticated as that role (not SET ROLE, which RESET ROLE
// undoes), so PostgreSQL itself refuses other schemas and tenants, the
// host's tables, server files and programs (pg_read_file, COPY ... TO
// PROGRAM), role changes, extensions and temporary objects (the host
// revokes TEMPORARY on the database from PUBLIC), and connections out
// (the host revokes dblink and foreign servers from PUBLIC, and refuses
// to serve a role that could still use them). What an owner may do but
// a plugin must not, the host checks at commit (grants_check.go): a run
// that changed its role, shared its objects or kept large objects rolls
// back.
//
// All requests of one export call share one transaction, committed when
// the call succeeds. Each statement runs inside a savepoint of its own so
// that a failing statement undoes only itself, as on SQLite. A plugin's
// transaction control fails its call: the command tag and the
// connection's transaction status tell the host, and a deferred commit
// guard, which only the host releases, makes a plugin's COMMIT of a
// transaction that wrote roll back instead. Requests are bounded in rows,
// bytes and time; a statement still running at the time limit is
// cancelled, and its backend ended if it goes on. When the plugin's part
// ends the host runs its deferred triggers within the same limits, before
// writing its rows or committing (see settle).
//
// Each request of the plugin's costs one round trip to the server: its
// statements and the host's around them go in the same pipeline (trip.go),
// the transaction's BEGIN with the first, each statement's savepoint
// before it and the commit guard's check after it, the release of the
// savepoints with the host's next statement; the COMMIT goes with the
// connection's reset, the session row with the end of the plugin's part.
//
// The plugin owns its schema and may set its search_path and its role's
// settings: the host's statements on its connections name pg_catalog and
// the host schema explicitly, the connections pin the settings the host
// relies on in their startup parameters (see runtimeParams), and hosts
// serialize on a row of the host schema no plugin role may lock
// (txn.PostgresLock).
//
// The host keeps the plugin's statements prepared on its connections
// across calls (stmtcache.go), and the server's cached plans: the reset
// at a call's end drops what the plugin left but not those.
//
// Joined to a txn.Txn, a session keeps its transaction across the calls of
// a run and the host writes its session row in it, through SECURITY
// DEFINER functions of the host schema that check the host key (a bind
// parameter), so the plugin can neither read nor write those rows.
package pgcap
