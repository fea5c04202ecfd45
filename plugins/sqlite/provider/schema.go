package provider

import (
	"strconv"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk/sql"
)

// migrations[v] brings an SQLite schema from user_version v to v+1.
// Append only, in step with pgMigrations.
var migrations = [][]string{
	{
		// The session's last sequence number. WITHOUT ROWID: small rows
		// looked up by key.
		`CREATE TABLE IF NOT EXISTS sessions (
			key      TEXT PRIMARY KEY,
			last_seq INTEGER NOT NULL
		) WITHOUT ROWID`,
		// A rowid table, since messages are large; provide and list go
		// through the (session, seq) index.
		`CREATE TABLE IF NOT EXISTS messages (
			session    TEXT NOT NULL,
			seq        INTEGER NOT NULL,
			role       TEXT NOT NULL,
			call_ids   TEXT,
			result_ids TEXT,
			body       TEXT NOT NULL,
			UNIQUE (session, seq)
		)`,
	},
}

// pgMigrations[v] brings a PostgreSQL schema from version v to v+1 (the
// version is kept in table schema_version). The tables are those of
// migrations, in PostgreSQL's types.
var pgMigrations = [][]string{
	{
		`CREATE TABLE IF NOT EXISTS sessions (
			key      text PRIMARY KEY,
			last_seq bigint NOT NULL
		)`,
		`CREATE TABLE IF NOT EXISTS messages (
			session    text NOT NULL,
			seq        bigint NOT NULL,
			role       text NOT NULL,
			call_ids   text,
			result_ids text,
			body       text NOT NULL,
			UNIQUE (session, seq)
		)`,
	},
}

// SchemaVersion is the user_version of a database this plugin migrated.
var SchemaVersion = len(migrations)

// The statements run on SQLite and PostgreSQL alike; their ?N parameters
// become $N on PostgreSQL (sql.Rebind).
const (
	bumpSequence = `INSERT INTO sessions (key, last_seq) VALUES (?1, ?2)
		ON CONFLICT (key) DO UPDATE SET last_seq = sessions.last_seq + excluded.last_seq`
	// insertMessages (see insertRows) writes many messages in one
	// statement: each row's first value counts down to 1 over one store's
	// messages, so they take the numbers the bump just reserved, in order.
	// The counter is read once per statement, not once per message: on
	// PostgreSQL a row updated many times in one transaction keeps every
	// version until it commits, and reading it per message made an import
	// of 100,000 messages quadratic (see RATIONALE).
	insertMessages = `INSERT INTO messages (session, seq, role, call_ids, result_ids, body)
		SELECT ?1, s.last_seq - v.column1 + 1, v.column2, v.column3, v.column4, v.column5
		FROM sessions AS s, (VALUES %s) AS v WHERE s.key = ?1`
	// selectWindow is the newest ?2 messages, and the session's first
	// message if it is a system message (kept whatever the window; twice
	// when it is also among the newest), both through the index, as one
	// JSON document that SQL writes (one statement, so one snapshot on
	// PostgreSQL too):
	//
	//	[[[seq, size, system, call_ids, result_ids], ...], [body, ...]]
	//
	// the headers and then the bodies as stored, each list ordered by seq.
	// size is the body's length in bytes, by which the plugin slices the
	// array of bodies without scanning it; system is 1 for a system
	// message, else 0; call_ids and result_ids are JSON arrays already.
	selectWindow = `SELECT '[[' || string_agg('[' || seq || ',' || octet_length(body) || ','
			|| CASE WHEN role = 'system' THEN '1,' ELSE '0,' END || coalesce(call_ids, 'null') || ',' || coalesce(result_ids, 'null') || ']', ',' ORDER BY seq)
		|| '],[' || string_agg(body, ',' ORDER BY seq) || ']]'
		FROM (
			SELECT seq, role, call_ids, result_ids, body FROM (
				SELECT seq, role, call_ids, result_ids, body FROM messages
				WHERE session = ?1 ORDER BY seq DESC LIMIT ?2) AS newest
			UNION ALL
			SELECT seq, role, call_ids, result_ids, body FROM messages
			WHERE session = ?1 AND role = 'system'
				AND seq = (SELECT min(seq) FROM messages WHERE session = ?1)
		) AS w`
	selectPage     = `SELECT seq, body FROM messages WHERE session = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3`
	deleteSession  = `DELETE FROM sessions WHERE key = ?1`
	deleteMessages = `DELETE FROM messages WHERE session = ?1`
)

// rowsPerInsert bounds the rows of one insertMessages statement: 5
// parameters a row stay far under SQLite's 32,766 and PostgreSQL's 65,535.
const rowsPerInsert = 200

// insertRows is insertMessages for n rows, its parameters numbered from
// ?2, five a row; the first row casts its count to an integer so that
// PostgreSQL types the VALUES column.
func insertRows(n int) string {
	if n < len(insertSQL) {
		return insertSQL[n]
	}
	return buildInsert(n)
}

// insertSQL holds insertRows' text for small n, formatted once: a turn
// stores a few messages, and formatting the statement anew on each store
// costs a WebAssembly guest more than the rest of its request.
var insertSQL = func() (q [8]string) {
	for n := 1; n < len(q); n++ {
		q[n] = buildInsert(n)
	}
	return q
}()

func buildInsert(n int) string {
	var b strings.Builder
	for i := range n {
		p := 2 + 5*i
		if i > 0 {
			b.WriteString(", ")
		}
		for j := range 5 {
			switch {
			case j > 0:
				b.WriteString(", ?")
			case i == 0:
				b.WriteString("(CAST(?")
			default:
				b.WriteString("(?")
			}
			b.WriteString(strconv.Itoa(p + j))
			if i == 0 && j == 0 {
				b.WriteString(" AS INTEGER)")
			}
		}
		b.WriteString(")")
	}
	return strings.Replace(insertMessages, "%s", b.String(), 1)
}

// migrated is true once this instance has brought a database up to date.
// Instances are recycled at any time, so this only saves work: a call that
// finds a table missing (its database was replaced, or the call that
// migrated was rolled back) migrates again.
var migrated bool

// withSchema runs f on a migrated database, with the SQL dialect the host
// named.
func withSchema(f func(dialect string) (*sql.Rows, error)) (*sql.Rows, error) {
	if !migrated {
		if err := migrate(); err != nil {
			return nil, err
		}
		migrated = true
	}
	dialect, err := sql.Dialect()
	if err != nil {
		return nil, err
	}
	rows, err := f(dialect)
	if err != nil && missingTable(err) {
		if err := migrate(); err != nil {
			return nil, err
		}
		return f(dialect)
	}
	return rows, err
}

// missingTable recognises SQLite's and PostgreSQL's error for a table
// that does not exist.
func missingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no such table") || (strings.Contains(msg, "relation") && strings.Contains(msg, "does not exist"))
}

// migrate brings the database to SchemaVersion.
func migrate() error {
	// A write first (Exec), so that on SQLite the call holds the write lock
	// before it reads the version and two instances migrating at once take
	// turns; the response names the dialect.
	var probe sql.Batch
	probe.Exec("SELECT 1")
	if _, err := probe.Run(); err != nil {
		return err
	}
	dialect, err := sql.Dialect()
	if err != nil {
		return err
	}
	if dialect == abi.DialectPostgres {
		return migratePostgres()
	}
	var b sql.Batch
	// A write first, so that the call holds the write lock before it reads
	// the version: two instances migrating at once take turns.
	b.Exec(migrations[0][0])
	b.Query("PRAGMA user_version")
	res, err := b.Run()
	if err != nil {
		return err
	}
	var v int
	if err := res[1].Rows.Row(0).Scan(&v); err != nil {
		return err
	}
	if v > SchemaVersion {
		return errNewerSchema(v)
	}
	if v == SchemaVersion {
		return nil
	}
	var up sql.Batch
	for ; v < SchemaVersion; v++ {
		for _, q := range migrations[v] {
			up.Exec(q)
		}
	}
	up.Exec("PRAGMA user_version = " + strconv.Itoa(SchemaVersion))
	_, err = up.Run()
	return err
}

// errNewerSchema is a database migrated by a newer plugin.
func errNewerSchema(v int) error {
	return &abi.Error{Code: abi.CodeFailedPrecondition, Message: "sqlite: the database has schema version " + strconv.Itoa(v) +
		", newer than this plugin's " + strconv.Itoa(SchemaVersion) + ": upgrade the plugin"}
}

// migratePostgres is migrate on PostgreSQL: the version in a table, and a
// transaction-scoped advisory lock (released with the call's transaction)
// so that instances migrating at once take turns.
func migratePostgres() error {
	var b sql.Batch
	b.Query("SELECT pg_advisory_xact_lock(8323747651)")
	b.Exec("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
	b.Query("SELECT coalesce(max(version), 0) FROM schema_version")
	res, err := b.Run()
	if err != nil {
		return err
	}
	var v int
	if err := res[2].Rows.Row(0).Scan(&v); err != nil {
		return err
	}
	if v > SchemaVersion {
		return errNewerSchema(v)
	}
	if v == SchemaVersion {
		return nil
	}
	var up sql.Batch
	for ; v < SchemaVersion; v++ {
		for _, q := range pgMigrations[v] {
			up.Exec(q)
		}
	}
	up.Exec("DELETE FROM schema_version")
	up.Exec("INSERT INTO schema_version (version) VALUES (" + strconv.Itoa(SchemaVersion) + ")")
	_, err = up.Run()
	return err
}
