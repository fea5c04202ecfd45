package pgcap

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// The host schema holds, next to the session store's tables (shared with
// host/store/pgstore):
//
//   - host_key: one random key, readable by the admin only. Every host
//     with the admin DSN reads the same key, derives the same role
//     passwords from it (HMAC) and passes it to the functions below, so
//     no two hosts race. Only the operator replaces it (RotateKey).
//   - journal: the commit journal, one row per (plugin role, session).
//   - commit_guard: an unlogged table whose deferred constraint trigger
//     fails any COMMIT of a transaction that wrote while the
//     transaction's guard row is there: the host deletes it (release)
//     after the plugin's last statement. A plugin's COMMIT (or PREPARE
//     TRANSACTION) therefore rolls back instead of committing part of a
//     call. The trigger only reads, so that it passes in the read-only
//     transaction the host commits (see session.commit); a row's trigger
//     still fires once the row is deleted. The released column is no
//     longer used. Nothing of it is in a setting the plugin's code could
//     read.
//   - put_row, get_rows, delete_row, guard, guard_if_wrote, release:
//     SECURITY DEFINER functions owned by the admin, through which the host
//     writes its rows in the transaction of a plugin's connection. The
//     plugin's role may execute them, but each checks the host key, passed
//     as a bind parameter (so it shows in no statement text), before doing
//     anything. No code of the plugin's runs in a statement that carries
//     the key: code can read the parameters of the statement it runs in.
func provisionHost(ctx context.Context, tx pgx.Tx, schema string) (key string, err error) {
	qs := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, txn.PostgresLock(qs)); err != nil {
		return "", err
	}
	stmts := append(txn.PostgresSessions(qs),
		`REVOKE ALL ON SCHEMA `+qs+` FROM PUBLIC`,
		`CREATE TABLE IF NOT EXISTS `+qs+`.host_key (
			one boolean PRIMARY KEY DEFAULT true CHECK (one),
			key text NOT NULL)`,
		`REVOKE ALL ON `+qs+`.host_key FROM PUBLIC`,
		`CREATE TABLE IF NOT EXISTS `+qs+`.journal (
			owner text NOT NULL, -- the plugin role
			id text NOT NULL,
			revision bigint NOT NULL,
			updated timestamptz NOT NULL,
			data json NOT NULL,
			PRIMARY KEY (owner, id))`,
		// The tenant of each tenant schema, whose name does not say it
		// (see tenantSchema): for the operator.
		`CREATE TABLE IF NOT EXISTS `+qs+`.tenants (
			schema text PRIMARY KEY,
			prefix text NOT NULL,
			tenant text NOT NULL,
			UNIQUE (prefix, tenant))`,
		`REVOKE ALL ON `+qs+`.tenants FROM PUBLIC`,
		`CREATE UNLOGGED TABLE IF NOT EXISTS `+qs+`.commit_guard (token_hash bytea NOT NULL)`,
		// Only when missing: ALTER TABLE waits for every open transaction
		// holding a guard row.
		`DO $d$ BEGIN
			IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = '`+qs+`.commit_guard'::regclass AND attname = 'released' AND NOT attisdropped) THEN
				ALTER TABLE `+qs+`.commit_guard ADD COLUMN released boolean NOT NULL DEFAULT false;
			END IF;
		END $d$`,
		`CREATE OR REPLACE FUNCTION `+qs+`.check_key(key text) RETURNS void
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			IF key IS NULL OR key IS DISTINCT FROM (SELECT k.key FROM `+qs+`.host_key k) THEN
				RAISE EXCEPTION '`+keyRefused+`' USING ERRCODE = 'insufficient_privilege';
			END IF;
		END $f$`,
		`CREATE OR REPLACE FUNCTION `+qs+`.commit_guard_check() RETURNS trigger
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			-- Only reads: the host's COMMIT runs in a read-only transaction.
			-- A row a host of the version before released stays, released.
			IF EXISTS (SELECT 1 FROM `+qs+`.commit_guard g WHERE g.token_hash = NEW.token_hash AND NOT g.released) THEN
				RAISE EXCEPTION 'transaction control is not allowed: the host commits each export call''s transaction'
					USING ERRCODE = 'insufficient_privilege';
			END IF;
			RETURN NULL;
		END $f$`,
		`DO $d$ BEGIN
			IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'commit_guard' AND tgrelid = '`+qs+`.commit_guard'::regclass) THEN
				CREATE CONSTRAINT TRIGGER commit_guard AFTER INSERT ON `+qs+`.commit_guard
					DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION `+qs+`.commit_guard_check();
			END IF;
		END $d$`,
		// guard inserts a token's row once: the checks after each statement
		// of one round trip share a token (see session.exec).
		`CREATE OR REPLACE FUNCTION `+qs+`.guard(key text, token_hash bytea) RETURNS void
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			PERFORM `+qs+`.check_key(key);
			INSERT INTO `+qs+`.commit_guard (token_hash) SELECT guard.token_hash
			WHERE NOT EXISTS (SELECT 1 FROM `+qs+`.commit_guard g WHERE g.token_hash = guard.token_hash);
		END $f$`,
		// guard_if_wrote is the check after each statement of the
		// plugin's until its transaction writes (see session.exec): the
		// guard when the transaction has a transaction id or a cursor WITH
		// HOLD, which its COMMIT would run. A function, so that the server
		// plans its queries once a connection, not once a statement.
		`CREATE OR REPLACE FUNCTION `+qs+`.guard_if_wrote(key text, token_hash bytea) RETURNS boolean
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			IF pg_current_xact_id_if_assigned() IS NULL AND NOT EXISTS (SELECT FROM pg_cursors c WHERE c.is_holdable) THEN
				RETURN false;
			END IF;
			PERFORM `+qs+`.guard(key, token_hash);
			RETURN true;
		END $f$`,
		`CREATE OR REPLACE FUNCTION `+qs+`.release(key text, token_hash bytea) RETURNS void
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			PERFORM `+qs+`.check_key(key);
			DELETE FROM `+qs+`.commit_guard g WHERE g.token_hash = release.token_hash;
		END $f$`,
		// put_row returns NULL when it wrote, else the stored revision
		// (not lower than rev).
		`CREATE OR REPLACE FUNCTION `+qs+`.put_row(key text, tab text, row_id text, rev bigint, body text) RETURNS bigint
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		DECLARE
			n bigint;
			stored bigint;
		BEGIN
			PERFORM `+qs+`.check_key(key);
			IF tab = 'sessions' THEN
				INSERT INTO `+qs+`.sessions AS s (id, revision, updated, data) VALUES (row_id, rev, now(), body::json)
				ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, updated = excluded.updated, data = excluded.data
				WHERE s.revision < excluded.revision;
				GET DIAGNOSTICS n = ROW_COUNT;
				IF n = 0 THEN
					SELECT s.revision INTO stored FROM `+qs+`.sessions s WHERE s.id = row_id;
				END IF;
			ELSIF tab = 'journal' THEN
				INSERT INTO `+qs+`.journal AS j (owner, id, revision, updated, data) VALUES (session_user, row_id, rev, now(), body::json)
				ON CONFLICT (owner, id) DO UPDATE SET revision = excluded.revision, updated = excluded.updated, data = excluded.data
				WHERE j.revision < excluded.revision;
				GET DIAGNOSTICS n = ROW_COUNT;
				IF n = 0 THEN
					SELECT j.revision INTO stored FROM `+qs+`.journal j WHERE j.owner = session_user AND j.id = row_id;
				END IF;
			ELSE
				RAISE EXCEPTION 'unknown host table %', tab USING ERRCODE = 'invalid_parameter_value';
			END IF;
			RETURN stored;
		END $f$`,
		// get_rows reads the rows of tabs for row_id in one query, so in
		// one snapshot, and in one statement, which needs no transaction
		// block of its own.
		`CREATE OR REPLACE FUNCTION `+qs+`.get_rows(key text, tabs text[], row_id text) RETURNS TABLE (tab text, revision bigint, body text)
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			PERFORM `+qs+`.check_key(key);
			IF tabs IS NULL OR NOT tabs <@ ARRAY['sessions', 'journal'] THEN
				RAISE EXCEPTION 'unknown host table in %', tabs USING ERRCODE = 'invalid_parameter_value';
			END IF;
			RETURN QUERY SELECT 'sessions'::text, s.revision, s.data::text FROM `+qs+`.sessions s WHERE 'sessions' = ANY (tabs) AND s.id = row_id
				UNION ALL
				SELECT 'journal'::text, j.revision, j.data::text FROM `+qs+`.journal j WHERE 'journal' = ANY (tabs) AND j.owner = session_user AND j.id = row_id;
		END $f$`,
		`CREATE OR REPLACE FUNCTION `+qs+`.delete_row(key text, tab text, row_id text) RETURNS void
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			PERFORM `+qs+`.check_key(key);
			IF tab = 'sessions' THEN
				DELETE FROM `+qs+`.sessions s WHERE s.id = row_id;
			ELSIF tab = 'journal' THEN
				DELETE FROM `+qs+`.journal j WHERE j.owner = session_user AND j.id = row_id;
			ELSE
				RAISE EXCEPTION 'unknown host table %', tab USING ERRCODE = 'invalid_parameter_value';
			END IF;
		END $f$`,
		// The checks of a transaction's begin and commit are functions,
		// whose plans the server keeps across transactions: the same
		// queries sent as statements are planned again each time.
		// begin_checks is the escape check, the transaction's server-side
		// limit (set within the function, it holds for the transaction's
		// statements after it) and catalog_writes in one statement: what
		// the host sends after each BEGIN (see session.beginSteps). (Hosts
		// of the version before send begin_gate, which they create.)
		`CREATE OR REPLACE FUNCTION `+qs+`.begin_checks(timeout text) RETURNS TABLE (inserted bigint, updated bigint, deleted bigint)
		LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			IF current_setting('track_counts') <> 'on' OR EXISTS (`+outboundSQL("session_user")+`) THEN
				RAISE EXCEPTION 'the host refuses this connection''s transactions' USING ERRCODE = 'insufficient_privilege';
			END IF;
			PERFORM set_config('statement_timeout', timeout, true);
			RETURN QUERY `+catalogWritesSQL+`;
		END $f$`,
		`CREATE OR REPLACE FUNCTION `+qs+`.catalog_writes() RETURNS TABLE (inserted bigint, updated bigint, deleted bigint)
		LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $f$
		BEGIN
			RETURN QUERY `+catalogWritesSQL+`;
		END $f$`,
		// reset_session resets what a plugin's statements may leave in a
		// connection's session (see session.End): DISCARD ALL without
		// DISCARD PLANS, closing only the prepared statements the plugin
		// made with PREPARE, not those the host made through the protocol
		// (see stmtcache.go). One function, not eight statements a call.
		// RESET ALL comes last and every name is qualified: RESET ALL
		// undoes the function's own search_path too, and after it a
		// function the plugin named format would win over pg_catalog's.
		`CREATE OR REPLACE FUNCTION `+qs+`.reset_session() RETURNS void
		LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp AS $f$
		DECLARE
			s record;
		BEGIN
			EXECUTE 'CLOSE ALL';
			FOR s IN SELECT p.name FROM pg_catalog.pg_prepared_statements p WHERE p.from_sql LOOP
				EXECUTE pg_catalog.format('DEALLOCATE %I', s.name);
			END LOOP;
			EXECUTE 'UNLISTEN *';
			PERFORM pg_catalog.pg_advisory_unlock_all();
			EXECUTE 'DISCARD TEMP';
			EXECUTE 'DISCARD SEQUENCES';
			EXECUTE 'RESET SESSION AUTHORIZATION';
			EXECUTE 'RESET ALL';
		END $f$`,
		// settle_deferred ends the plugin's part of a transaction that
		// wrote (see session.settle), in one statement. It runs the
		// plugin's deferred triggers until none is left: a trigger may defer
		// others again (SET CONSTRAINTS ALL DEFERRED), which would run at
		// the COMMIT, after the host's checks. Only a write can queue a
		// trigger, and every write takes a new command id, which nothing
		// lowers (where a TRUNCATE resets a table's counters): so a round
		// after which command_id's probe row has the id right after the
		// one before wrote nothing and left nothing to run. Then it defers
		// the commit guard's trigger again, for a guard a later statement
		// of the plugin's arms, and sets the host's limit for the
		// statements after it, which holds whatever the triggers set.
		//
		// No SET clause: the plugin's triggers run in it, under the
		// plugin's search_path, so every name of its own is qualified or a
		// keyword (an operator found through that search_path could end
		// the loop early). No host key, in it or in the probe functions it
		// calls: code running inside a statement can read its parameters
		// (an error's context shows them once the plugin sets
		// log_parameter_max_length_on_error). A plugin that calls the
		// probes itself only inserts rows into a table whose rows every
		// settle deletes, within its own transaction, whose COMMIT the
		// guard refuses once it wrote. Each row names its backend, and a
		// settle deletes its own through an index: rows another tenant
		// piles up, or holds in a long transaction, cost it nothing.
		// (Hosts of the version before call fire_deferred, command_id and
		// command_probes_done with the key, on the table command_probe,
		// which they create themselves.)
		`CREATE UNLOGGED TABLE IF NOT EXISTS `+qs+`.command_probes (pid integer NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS command_probes_pid ON `+qs+`.command_probes (pid)`,
		`CREATE OR REPLACE FUNCTION `+qs+`.command_id() RETURNS bigint
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
		DECLARE
			id bigint;
		BEGIN
			INSERT INTO `+qs+`.command_probes (pid) VALUES (pg_backend_pid()) RETURNING cmin::text::bigint INTO id;
			RETURN id;
		END $f$`,
		// Through the index whatever the statistics say: a plan made while
		// the table was empty lasts a connection.
		`CREATE OR REPLACE FUNCTION `+qs+`.command_probes_done() RETURNS void
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $f$
		BEGIN
			DELETE FROM `+qs+`.command_probes p WHERE p.pid = pg_backend_pid();
		END $f$`,
		`CREATE OR REPLACE FUNCTION `+qs+`.settle_deferred(host_timeout text) RETURNS void
		LANGUAGE plpgsql SECURITY INVOKER AS $f$
		DECLARE
			before bigint;
			after bigint;
		BEGIN
			before := `+qs+`.command_id();
			LOOP
				EXECUTE 'SET CONSTRAINTS ALL IMMEDIATE';
				after := `+qs+`.command_id();
				EXIT WHEN after OPERATOR(pg_catalog.=) (before OPERATOR(pg_catalog.+) 1);
				before := after;
			END LOOP;
			PERFORM `+qs+`.command_probes_done();
			EXECUTE 'SET CONSTRAINTS `+qs+`.commit_guard DEFERRED';
			PERFORM pg_catalog.set_config('statement_timeout', host_timeout, true);
		END $f$`,
		// before_commit is what the host sends before its COMMIT (see
		// session.commit): every cursor closed, since the COMMIT would run
		// a cursor WITH HOLD's query to its end, the limit of the COMMIT,
		// and the transaction read-only, as a second line. No SET clause:
		// a function's own settings end with it; every name is qualified.
		`CREATE OR REPLACE FUNCTION `+qs+`.before_commit(timeout text) RETURNS void
		LANGUAGE plpgsql SECURITY INVOKER AS $f$
		BEGIN
			EXECUTE 'CLOSE ALL';
			PERFORM pg_catalog.set_config('statement_timeout', timeout, true);
			PERFORM pg_catalog.set_config('transaction_read_only', 'on', true);
		END $f$`,
		`REVOKE ALL ON FUNCTION `+qs+`.check_key(text), `+qs+`.commit_guard_check(), `+hostFunctions(qs)+` FROM PUBLIC`,
		// Plugin roles use the host schema to call the functions above:
		// nothing else in it is PUBLIC's, whoever put it there (an
		// extension created by an admin whose name is the schema's lands
		// in it without a SCHEMA clause).
		`REVOKE ALL ON ALL ROUTINES IN SCHEMA `+qs+` FROM PUBLIC`,
		`REVOKE ALL ON ALL TABLES IN SCHEMA `+qs+` FROM PUBLIC`,
		`REVOKE ALL ON ALL SEQUENCES IN SCHEMA `+qs+` FROM PUBLIC`,
		// No temporary objects for anyone not granted them explicitly (a
		// plugin's would outlive its call on a pooled connection), and no
		// objects in public (PostgreSQL 15 already revokes that).
		`DO $d$ BEGIN EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database()); END $d$`,
		`DO $d$ BEGIN
			IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public') THEN
				REVOKE CREATE ON SCHEMA public FROM PUBLIC;
			END IF;
		END $d$`,
	)
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	var v *int
	if err := tx.QueryRow(ctx, `SELECT max(version) FROM `+qs+`.store_version`).Scan(&v); err != nil {
		return "", err
	}
	switch {
	case v == nil:
		if _, err := tx.Exec(ctx, `INSERT INTO `+qs+`.store_version (version) VALUES ($1)`, txn.PostgresSessionsLayout); err != nil {
			return "", err
		}
	case *v > txn.PostgresRotatedLayout:
		return "", fmt.Errorf("the sessions tables are at version %d, newer than this program's %d: upgrade the program", *v, txn.PostgresRotatedLayout)
	}
	// Made by the server, never a parameter, which may be logged.
	if _, err := tx.Exec(ctx, `INSERT INTO `+qs+`.host_key (key) VALUES (`+newKeySQL+`) ON CONFLICT DO NOTHING`); err != nil {
		return "", err
	}
	err = tx.QueryRow(ctx, `SELECT key FROM `+qs+`.host_key`).Scan(&key)
	return key, err
}

// callable are the host schema's functions that plugin roles execute
// (the host calls them on the plugin's connections), by signature.
var callable = []string{
	"guard(text, bytea)", "guard_if_wrote(text, bytea)", "release(text, bytea)",
	"put_row(text, text, text, bigint, text)", "get_rows(text, text[], text)", "delete_row(text, text, text)",
	"begin_checks(text)", "catalog_writes()", "reset_session()", "settle_deferred(text)", "before_commit(text)",
	"command_id()", "command_probes_done()",
}

// hostFunctions is callable, qualified by the quoted host schema qs, as
// a list for GRANT and REVOKE.
func hostFunctions(qs string) string {
	fs := make([]string, len(callable))
	for i, f := range callable {
		fs[i] = qs + "." + f
	}
	return strings.Join(fs, ", ")
}

func firstLine(q string) string {
	q, _, _ = strings.Cut(strings.TrimSpace(q), "\n")
	return q
}

// provisionRole makes name a role that logs in with the derived password,
// inherits nothing, belongs to no other role, has no member but the admin
// and owns schema, its search path; it may call the host functions and
// nothing else of the host schema, and nothing that opens a connection.
//
// The admin may be a superuser or a role with CREATEROLE that owns the
// database: such an admin makes itself a member of the role (PostgreSQL
// 15 requires that to create a schema the role owns) and may not name
// the attributes only a superuser may give.
func provisionRole(ctx context.Context, tx pgx.Tx, hostSchema, schema, name, pw string) error {
	qs, qr, qh := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{name}.Sanitize(), pgx.Identifier{hostSchema}.Sanitize()
	// Every provisioning of one host schema takes its lock first: grants of
	// different roles update the same catalog rows (the database's and the
	// host schema's privileges), and hosts starting together would otherwise
	// fail with "tuple concurrently updated" or a deadlock.
	if _, err := tx.Exec(ctx, txn.PostgresLock(qh)); err != nil {
		return err
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	var super bool
	if err := tx.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil {
		return err
	}
	verb, attrs := "CREATE", " NOSUPERUSER NOREPLICATION NOBYPASSRLS"
	if exists {
		verb = "ALTER"
		if !super {
			// Naming them at all takes a superuser; a CREATEROLE admin
			// cannot have given them, and the check below sees to it.
			attrs = ""
		}
	}
	// The password goes over as a SCRAM verifier, never as text: the
	// statement may be logged.
	stmts := []string{
		verb + ` ROLE ` + qr + ` LOGIN NOINHERIT NOCREATEDB NOCREATEROLE` + attrs + ` PASSWORD ` + quoteLiteral(scramVerifier(pw)),
		`DO $d$ DECLARE m record; BEGIN
			FOR m IN SELECT g.rolname FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid JOIN pg_roles r ON r.oid = a.member WHERE r.rolname = ` + quoteLiteral(name) + ` LOOP
				EXECUTE format('REVOKE %I FROM %I', m.rolname, ` + quoteLiteral(name) + `);
			END LOOP;
			FOR m IN SELECT r.rolname FROM pg_auth_members a JOIN pg_roles g ON g.oid = a.roleid JOIN pg_roles r ON r.oid = a.member WHERE g.rolname = ` + quoteLiteral(name) + ` AND r.rolname <> current_user LOOP
				EXECUTE format('REVOKE %I FROM %I', ` + quoteLiteral(name) + `, m.rolname);
			END LOOP;
			IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
				EXECUTE format('GRANT %I TO %I', ` + quoteLiteral(name) + `, current_user);
			END IF;
		END $d$`,
		// Settings the plugin gave its role (ALTER ROLE CURRENT_USER SET)
		// go; the host pins those it depends on in each connection's
		// startup parameters as well (see initRole).
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			if strings.Contains(q, "PASSWORD") {
				q = verb + " ROLE " + qr
			}
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	if err := checkSignal(ctx, tx, name); err != nil {
		return err
	}
	stmts = []string{
		`ALTER ROLE ` + qr + ` RESET ALL`,
		`DO $d$ BEGIN EXECUTE format('ALTER ROLE %I IN DATABASE %I RESET ALL', ` + quoteLiteral(name) + `, current_database()); END $d$`,
		`ALTER ROLE ` + qr + ` SET search_path = ` + qs,
		`DO $d$ BEGIN EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), ` + quoteLiteral(name) + `); END $d$`,
		`CREATE SCHEMA IF NOT EXISTS ` + qs + ` AUTHORIZATION ` + qr,
		`ALTER SCHEMA ` + qs + ` OWNER TO ` + qr,
		`REVOKE ALL ON SCHEMA ` + qs + ` FROM PUBLIC`,
		`GRANT USAGE ON SCHEMA ` + qh + ` TO ` + qr,
		`GRANT EXECUTE ON FUNCTION ` + hostFunctions(qh) + ` TO ` + qr,
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			if strings.Contains(q, "PASSWORD") {
				q = verb + " ROLE " + qr
			}
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	var attrsOK, temp, public bool
	if err := tx.QueryRow(ctx, `SELECT NOT (r.rolsuper OR r.rolreplication OR r.rolbypassrls),
			has_database_privilege(r.rolname, current_database(), 'TEMPORARY'),
			coalesce(has_schema_privilege(r.rolname, (SELECT n.oid FROM pg_namespace n WHERE n.nspname = 'public'), 'CREATE'), false)
		FROM pg_roles r WHERE r.rolname = $1`, name).Scan(&attrsOK, &temp, &public); err != nil {
		return err
	}
	switch {
	case !attrsOK:
		return fmt.Errorf("%w: role %s is a superuser, or may replicate or bypass row security: only a superuser can take that away (ALTER ROLE ... NOSUPERUSER NOREPLICATION NOBYPASSRLS)", ErrAdminPrivileges, qr)
	case temp:
		return fmt.Errorf("%w: it cannot revoke TEMPORARY on the database from PUBLIC: make the admin the database's owner, or revoke it as the owner", ErrAdminPrivileges)
	case public:
		return fmt.Errorf("%w: it cannot revoke CREATE on schema public from PUBLIC: make the admin the database's owner, or revoke it as the schema's owner", ErrAdminPrivileges)
	}
	if err := checkHostSchema(ctx, tx, hostSchema, name); err != nil {
		return err
	}
	return checkOutbound(ctx, tx, name)
}

// migrateTenant records the tenant of schema and, where the tenant's
// schema and role still have the names that said the tenant (legacy,
// prefix__tenant, and its role legacyRole), renames them to schema and
// name, moving the role's journal rows with it: the data, its owner's
// grants and the role's members stay as they were (renameTenant, which a
// key rotation runs too). It runs under the host schema's lock, before
// provisionRole.
func migrateTenant(ctx context.Context, tx pgx.Tx, hostSchema, schema, name, legacy, legacyRole string) error {
	qh := pgx.Identifier{hostSchema}.Sanitize()
	if _, err := tx.Exec(ctx, txn.PostgresLock(qh)); err != nil {
		return err
	}
	prefix, tenant, _ := strings.Cut(legacy, "__")
	if _, err := tx.Exec(ctx, `INSERT INTO `+qh+`.tenants (schema, prefix, tenant) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, schema, prefix, tenant); err != nil {
		return err
	}
	return renameTenant(ctx, tx, qh, legacy, schema, legacyRole, name)
}

// checkSignal makes sure the admin has the privileges of role name: a
// CREATEROLE admin needs them to provision the role's schema, and to end
// the role's backend that ignores its cancel (pg_terminate_backend takes
// the privileges of the backend's role or of pg_signal_backend; see
// session.abandon). A NOINHERIT admin's membership gives none.
func checkSignal(ctx context.Context, tx pgx.Tx, name string) error {
	var ok bool
	var admin string
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.pg_has_role(current_user, $1, 'USAGE'), pg_catalog.quote_ident(current_user)`, name).Scan(&ok, &admin); err != nil {
		return err
	}
	if ok {
		return nil
	}
	return fmt.Errorf("%w: it is NOINHERIT, so it has none of the privileges of the plugin roles it belongs to, which it needs to provision their schemas and end their stuck backends:\nas a superuser, ALTER ROLE %s INHERIT", ErrAdminPrivileges, admin)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// password is the role's password: HMAC-SHA256 of its name under the host
// key.
func password(key, role string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("wasmhist role password\x00" + role))
	return hex.EncodeToString(m.Sum(nil))
}

// scramVerifier is what PostgreSQL stores for a SCRAM-SHA-256 password
// (RFC 5802, RFC 7677), so that the password itself never reaches the
// server in a statement.
func scramVerifier(pw string) string {
	const iter = 4096
	salt := make([]byte, 16)
	rand.Read(salt)
	salted, err := pbkdf2.Key(sha256.New, pw, salt, iter, sha256.Size)
	if err != nil {
		panic(err) // only for parameters out of range, which these are not
	}
	mac := func(k []byte, msg string) []byte {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iter, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key")))
}

// roleName is the role of schema in database db: readable, and unique in
// the cluster (roles are shared by its databases, schemas are not).
func roleName(db, schema string) string {
	h := sha256.Sum256([]byte(db + "\x00" + schema))
	base := schema
	if len(base) > 40 {
		base = base[:40]
	}
	return "wasmhist_" + base + "_" + hex.EncodeToString(h[:4])
}
