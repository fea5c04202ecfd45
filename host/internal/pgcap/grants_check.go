package pgcap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wasmhist/wasmhist/abi"
)

// What a plugin's role may not do even with every right it has: open a
// connection out of the run (dblink, a foreign server), share its objects
// with another role or PUBLIC, keep data outside its schema (large
// objects), or change its own role (its password, above all: a password
// the plugin knows would let anyone who can reach the server log in as
// the role, outside the host).
//
// Every statement here runs on the plugin's connection, under whatever
// search_path the plugin set: each name is schema-qualified (pg_catalog.*,
// OPERATOR(pg_catalog.=)), and role names are keywords (session_user).

var (
	// ErrOutbound: the database lets plugin roles open connections, and
	// the admin cannot revoke that.
	ErrOutbound = errors.New("pgcap: the database lets plugin roles open connections")
	// ErrAdminPrivileges: the admin role cannot take a right from PUBLIC
	// that plugin roles must not have.
	ErrAdminPrivileges = errors.New("pgcap: the admin role lacks a privilege the host needs")
	// ErrShared: a run granted the plugin's objects to another role or to
	// PUBLIC, or kept large objects; its transaction was rolled back.
	ErrShared = errors.New("pgcap: the run shared the plugin's objects")
	// ErrRoleChanged: a run changed the plugin's role (its password or its
	// settings); its transaction was rolled back.
	ErrRoleChanged = errors.New("pgcap: the run changed the plugin's role")
)

// outboundSQL lists what role (an SQL expression of type name) may use to
// open connections: the functions of extension dblink, foreign-data
// wrappers and foreign servers (postgres_fdw's and any other).
func outboundSQL(role string) string {
	return `SELECT 'function', p.oid::pg_catalog.regprocedure::pg_catalog.text
		FROM pg_catalog.pg_extension e
		JOIN pg_catalog.pg_depend d ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
			AND d.refobjid OPERATOR(pg_catalog.=) e.oid
			AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
			AND d.deptype OPERATOR(pg_catalog.=) 'e'
		JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid
		WHERE e.extname OPERATOR(pg_catalog.=) 'dblink' AND pg_catalog.has_function_privilege(` + role + `, p.oid, 'EXECUTE')
	UNION ALL
	SELECT 'foreign data wrapper', pg_catalog.quote_ident(w.fdwname)
		FROM pg_catalog.pg_foreign_data_wrapper w WHERE pg_catalog.has_foreign_data_wrapper_privilege(` + role + `, w.oid, 'USAGE')
	UNION ALL
	SELECT 'foreign server', pg_catalog.quote_ident(s.srvname)
		FROM pg_catalog.pg_foreign_server s WHERE pg_catalog.has_server_privilege(` + role + `, s.oid, 'USAGE')`
}

// revokeOutbound takes from PUBLIC what outboundSQL finds for role ($1)
// and the admin may take (as its owner, or as a superuser); REVOKE by
// anyone else is a warning, not an error, and outboundSQL run again
// tells what is left.
const revokeOutbound = `DO $d$ DECLARE o record; BEGIN
	FOR o IN ` + "SELECT * FROM (%s) x(kind, name)" + ` LOOP
		EXECUTE pg_catalog.format('REVOKE ALL ON %%s %%s FROM PUBLIC', o.kind, o.name);
	END LOOP;
END $d$`

// checkOutbound fails when role may open connections after the admin
// took from PUBLIC what it could.
func checkOutbound(ctx context.Context, q pgx.Tx, role string) error {
	lit := quoteLiteral(role) + `::pg_catalog.name`
	if _, err := q.Exec(ctx, fmt.Sprintf(revokeOutbound, outboundSQL(lit))); err != nil {
		return fmt.Errorf("revoke connection-making functions from PUBLIC: %w", err)
	}
	left, err := collectPairs(ctx, q, outboundSQL(lit))
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%w (%s), and the admin cannot revoke it: as their owner, REVOKE ALL ON each FROM PUBLIC (or drop the extension)",
			ErrOutbound, summarize(left))
	}
	return nil
}

// checkHostSchema fails when role may use anything in the host schema
// that was not granted to it by name, that is, through PUBLIC: objects
// someone other than the admin put there (a trusted extension's belong
// to the bootstrap superuser), which provisioning could not revoke.
func checkHostSchema(ctx context.Context, q pgx.Tx, hostSchema, role string) error {
	left, err := collectPairs(ctx, q, `WITH me AS (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = $2)
		SELECT 'function', p.oid::pg_catalog.regprocedure::pg_catalog.text FROM me, pg_catalog.pg_proc p
		WHERE p.pronamespace = $1::pg_catalog.regnamespace AND pg_catalog.has_function_privilege(me.oid, p.oid, 'EXECUTE')
			AND NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = me.oid)
		UNION ALL
		SELECT 'relation', c.oid::pg_catalog.regclass::pg_catalog.text FROM me, pg_catalog.pg_class c
		WHERE c.relnamespace = $1::pg_catalog.regnamespace
			AND pg_catalog.has_table_privilege(me.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')`,
		pgx.Identifier{hostSchema}.Sanitize(), role)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%w: %s in the host schema: PUBLIC's, and the admin cannot revoke it: move it out (ALTER EXTENSION ... SET SCHEMA) or revoke it as its owner",
			ErrAdminPrivileges, summarize(left))
	}
	return nil
}

// summarize names the first few of items, for a message of one line.
func summarize(items []string) string {
	const shown = 3
	if len(items) <= shown {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:shown], ", "), len(items)-shown)
}

func collectPairs(ctx context.Context, q pgx.Tx, sql string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var kind, name string
		if err := rows.Scan(&kind, &name); err != nil {
			return nil, err
		}
		out = append(out, kind+" "+name)
	}
	return out, rows.Err()
}

// catalogWritesSQL, the body of the host schema's catalog_writes, reads
// how many rows the connection's transaction wrote to each catalog in
// catalogWrites's order. PostgreSQL counts every
// insert, update and delete of a transaction (those of its rolled-back
// subtransactions included) until the backend reports them, which it does
// only between transactions, and possibly after several: so the host
// reads them right after its BEGIN and again before its COMMIT, and
// compares.
const catalogWritesSQL = `SELECT pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid),
		pg_catalog.pg_stat_get_xact_tuples_updated(c.oid), pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid)
	FROM (VALUES (1, 'pg_catalog.pg_authid'::pg_catalog.regclass), (2, 'pg_catalog.pg_db_role_setting'::pg_catalog.regclass),
		(3, 'pg_catalog.pg_namespace'::pg_catalog.regclass), (4, 'pg_catalog.pg_class'::pg_catalog.regclass),
		(5, 'pg_catalog.pg_attribute'::pg_catalog.regclass), (6, 'pg_catalog.pg_proc'::pg_catalog.regclass),
		(7, 'pg_catalog.pg_type'::pg_catalog.regclass), (8, 'pg_catalog.pg_default_acl'::pg_catalog.regclass),
		(9, 'pg_catalog.pg_auth_members'::pg_catalog.regclass), (10, 'pg_catalog.pg_largeobject_metadata'::pg_catalog.regclass)) c(n, oid)
	ORDER BY c.n`

// roleCatalogs is how many of catalogWritesSQL's first rows hold the
// role itself; the others hold privileges and large objects.
const roleCatalogs = 2

// catalogRows is how many rows catalogWritesSQL reads, one a catalog.
const catalogRows = 10

// catalogWrites is what catalogWritesSQL read: rows written to the role's
// catalogs and to those that hold privileges.
type catalogWrites struct{ role, privileges int64 }

func readCatalogWrites(r *pgconn.Result) (catalogWrites, error) {
	var w catalogWrites
	if len(r.Rows) != catalogRows {
		return w, fmt.Errorf("catalog counters: %d rows", len(r.Rows))
	}
	for i, row := range r.Rows {
		if err := w.add(i, row); err != nil {
			return w, err
		}
	}
	return w, nil
}

// streamCatalogWrites is readCatalogWrites on the rows as they arrive,
// without copying them.
func streamCatalogWrites(rr *pgconn.ResultReader) (catalogWrites, error) {
	var w catalogWrites
	i := 0
	for ; rr.NextRow(); i++ {
		if err := w.add(i, rr.Values()); err != nil {
			return w, err
		}
	}
	if i != catalogRows {
		return w, fmt.Errorf("catalog counters: %d rows", i)
	}
	return w, nil
}

// add counts row i of catalogWritesSQL.
func (w *catalogWrites) add(i int, row [][]byte) error {
	for _, v := range row {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("catalog counters: %w", err)
		}
		if i < roleCatalogs {
			w.role += n
		} else {
			w.privileges += n
		}
	}
	return nil
}

// sharedSQL lists what the session user's objects grant to anyone else
// (PUBLIC's grantee is 0), the defaults it set for objects to come, the
// role memberships it granted and the large objects it owns.
const sharedSQL = `WITH me AS (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) session_user)
SELECT DISTINCT x.what, x.grantee, pg_catalog.pg_get_userbyid(x.grantee) FROM (
SELECT 'schema ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(n.nspname), a.grantee
	FROM me, pg_catalog.pg_namespace n, LATERAL pg_catalog.aclexplode(n.nspacl) a
	WHERE n.nspowner OPERATOR(pg_catalog.=) me.oid AND a.grantee OPERATOR(pg_catalog.<>) me.oid
UNION ALL
SELECT 'relation ' OPERATOR(pg_catalog.||) c.oid::pg_catalog.regclass::pg_catalog.text, a.grantee
	FROM me, pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
	WHERE c.relowner OPERATOR(pg_catalog.=) me.oid AND a.grantee OPERATOR(pg_catalog.<>) me.oid
UNION ALL
SELECT 'column ' OPERATOR(pg_catalog.||) c.oid::pg_catalog.regclass::pg_catalog.text OPERATOR(pg_catalog.||) '.'
		OPERATOR(pg_catalog.||) pg_catalog.quote_ident(t.attname), a.grantee
	FROM me, pg_catalog.pg_attribute t
	JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.attrelid, LATERAL pg_catalog.aclexplode(t.attacl) a
	WHERE t.attacl IS NOT NULL AND c.relowner OPERATOR(pg_catalog.=) me.oid AND a.grantee OPERATOR(pg_catalog.<>) me.oid
UNION ALL
SELECT 'function ' OPERATOR(pg_catalog.||) p.oid::pg_catalog.regprocedure::pg_catalog.text, a.grantee
	FROM me, pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
	WHERE p.proowner OPERATOR(pg_catalog.=) me.oid AND a.grantee OPERATOR(pg_catalog.<>) me.oid
UNION ALL
SELECT 'type ' OPERATOR(pg_catalog.||) y.oid::pg_catalog.regtype::pg_catalog.text, a.grantee
	FROM me, pg_catalog.pg_type y, LATERAL pg_catalog.aclexplode(y.typacl) a
	WHERE y.typowner OPERATOR(pg_catalog.=) me.oid AND a.grantee OPERATOR(pg_catalog.<>) me.oid
UNION ALL
SELECT 'default privileges', a.grantee
	FROM me, pg_catalog.pg_default_acl d, LATERAL pg_catalog.aclexplode(d.defaclacl) a
	WHERE d.defaclrole OPERATOR(pg_catalog.=) me.oid AND a.grantee OPERATOR(pg_catalog.<>) me.oid
UNION ALL
SELECT 'membership in ' OPERATOR(pg_catalog.||) m.roleid::pg_catalog.regrole::pg_catalog.text, m.member
	FROM me, pg_catalog.pg_auth_members m WHERE m.grantor OPERATOR(pg_catalog.=) me.oid
UNION ALL
SELECT 'large object ' OPERATOR(pg_catalog.||) l.oid::pg_catalog.text, NULL
	FROM me, pg_catalog.pg_largeobject_metadata l WHERE l.lomowner OPERATOR(pg_catalog.=) me.oid
) x(what, grantee)
LIMIT 5`

// beginTracked runs begin, the host's BEGIN, and in the same round trip
// reads the catalog counters the commit compares with, what the role may
// use to open connections (a dblink installed after the role was
// provisioned fails the call rather than letting it out) and whether the
// server keeps the counters at all (track_counts).
func (s *session) beginTracked(ctx context.Context, begin string) error {
	res, err := s.pc.Exec(ctx, begin+"; "+s.db.sql.writes+"; "+outboundSQL("session_user")+
		"; SELECT pg_catalog.current_setting('track_counts')").ReadAll()
	if err != nil {
		return err
	}
	// begin's own results first, then the three queries'.
	n := len(res)
	if n < 4 || len(res[n-1].Rows) != 1 {
		return fmt.Errorf("begin: %d results", len(res))
	}
	writes, outbound, track := res[n-3], res[n-2], res[n-1]
	if s.writes, err = readCatalogWrites(writes); err != nil {
		return err
	}
	if string(track.Rows[0][0]) != "on" {
		// Without it the counters stay 0 and checkCatalog sees nothing.
		s.host(ctx, "ROLLBACK")
		return abi.Errorf(abi.CodeUnavailable, "sql: the server's track_counts is off: the host needs it on (PostgreSQL's default) to check what a run changed")
	}
	if len(outbound.Rows) > 0 {
		s.host(ctx, "ROLLBACK")
		var left []string
		for _, r := range outbound.Rows {
			left = append(left, string(r[0])+" "+string(r[1]))
		}
		return abi.Errorf(abi.CodeUnavailable, "sql: the database lets this plugin's role open connections (%s): the operator must revoke it (REVOKE ALL ... FROM PUBLIC)",
			summarize(left))
	}
	return nil
}

// checkCatalog runs just before the host's COMMIT: it refuses a
// transaction that changed the plugin's role, or that shared the plugin's
// objects with another role or PUBLIC or kept large objects. The full
// look at the catalog runs only when the transaction wrote to a catalog
// that holds privileges; plain reads and writes of the plugin's tables
// cost one query.
//
// settle reads the counters in its round trip (settled): no code of the
// plugin's runs between it and the COMMIT unless a statement of the
// plugin's does, which drops that reading.
func (s *session) checkCatalog(ctx context.Context) error {
	now := s.settledWrites
	if now == nil {
		res, err := s.pc.Exec(ctx, s.db.sql.writes).ReadAll()
		if err != nil {
			return err
		}
		if len(res) != 1 {
			return fmt.Errorf("catalog counters: %d results", len(res))
		}
		w, err := readCatalogWrites(res[0])
		if err != nil {
			return err
		}
		now = &w
	}
	if now.role != s.writes.role {
		return fmt.Errorf("%w: ALTER ROLE (a password or a setting) is the host's to make", ErrRoleChanged)
	}
	if now.privileges == s.writes.privileges {
		return nil
	}
	rr := s.pc.ExecParams(ctx, sharedSQL, nil, nil, nil, nil)
	var found []string
	for rr.NextRow() {
		v := rr.Values()
		what := string(v[0])
		switch {
		case v[1] == nil:
		case string(v[1]) == "0":
			what += " to PUBLIC"
		default:
			what += " to " + string(v[2])
		}
		found = append(found, what)
	}
	if _, err := rr.Close(); err != nil {
		return err
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s: a plugin's objects are its own (revoke the grant, or unlink the large object)", ErrShared, strings.Join(found, "; "))
	}
	return nil
}
