package pgcap

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// ErrKeyRotated is the cause of a call's failure when the host key was
// rotated (RotateKey) after this host read it: the call fails, and the
// host's next call reads the new key.
var ErrKeyRotated = hosterr.ErrKeyRotated

// keyRefused is the message of check_key's exception (see provisionHost).
const keyRefused = "only the host may use this function"

// Rotation is what RotateKey changed.
type Rotation struct {
	// Roles is the number of plugin roles given a password derived from
	// the new key.
	Roles int
	// Tenants is the number of tenant schemas, and their roles, renamed
	// to the names the new key derives.
	Tenants int
	// Ended is the number of plugin-role backends ended, so that no
	// connection made with a password of the old key goes on.
	Ended int
}

// RotateKey replaces the host key of the host schema hostSchema
// (DefaultHostSchema when empty) of the database adminDSN connects to.
// A first transaction ends the plugin roles' backends and turns their
// logins off; a second, under the host schema's lock, has the server make
// a new key, renames every tenant's schema and role to the names it
// derives (their data, grants and journal rows stay theirs), gives every
// plugin role the password it derives and its logins back, and shuts out
// hosts of older versions (see rotate). Then it ends every plugin-role
// backend that started before the commit. A rotation that fails keeps the
// old key and gives the logins back.
//
// A key known outside the host (for example read by a plugin from a host
// that leaked it) then opens nothing: the host's functions refuse it, and
// no role's password derives from it. Hosts of this version running
// meanwhile notice at their next use of the key or of a connection, fail
// that call (and the calls in flight, whose backends end), and read the
// new key for the call after; nothing of a failed call commits.
func RotateKey(ctx context.Context, adminDSN, hostSchema string) (Rotation, error) {
	if hostSchema == "" {
		hostSchema = DefaultHostSchema
	}
	if !validSchemaName(hostSchema) {
		return Rotation{}, fmt.Errorf("pgcap: rotate the host key: host schema %q: want 1 to 40 of a-z, 0-9 and _", hostSchema)
	}
	fail := func(err error) (Rotation, error) {
		return Rotation{}, fmt.Errorf("pgcap: rotate the host key of schema %q: %w", hostSchema, err)
	}
	cfg, err := poolConfig(adminDSN)
	if err != nil {
		return fail(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fail(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	qh := pgx.Identifier{hostSchema}.Sanitize()
	in := func(f func(tx pgx.Tx) error) error {
		return txn.PostgresRetry(ctx, func() error { return pgx.BeginFunc(ctx, conn, f) })
	}
	var rot Rotation
	var roles []uint32
	for try := 1; ; try++ {
		// First the plugin roles' logins go off, so that the backends the
		// rotation ends stay ended: a busy host reconnects within
		// milliseconds, with the old password until the rotation commits.
		var ended int
		err = in(func(tx pgx.Tx) error {
			var err error
			ended, err = lockOut(ctx, tx, hostSchema)
			return err
		})
		if err == nil {
			err = in(func(tx pgx.Tx) error {
				var err error
				rot, roles, err = rotate(ctx, tx, hostSchema)
				return err
			})
		}
		rot.Ended += ended
		var pe *pgconn.PgError
		if err == nil || try == rotateTries || !errors.As(err, &pe) || pe.Code != "55P03" {
			break
		}
	}
	if err != nil {
		// The old key stays; the roles' logins come back, even when ctx
		// ended or the connection broke.
		if rerr := restoreLogins(ctx, cfg.ConnConfig, qh); rerr != nil {
			return fail(fmt.Errorf("%w; and giving the plugin roles their logins back failed: %w: run the rotation again", err, rerr))
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" {
			return fail(fmt.Errorf("%w: a lock was held for longer than %s, %d times: the old key stays; try again when the plugins' calls are fewer", err, rotateLockWait, rotateTries))
		}
		return fail(fmt.Errorf("%w: the old key stays and the plugin roles' logins are back: run the rotation again", err))
	}
	// Committed: a login now needs the new key's password. A backend
	// that started before the commit and still runs ends here.
	var committed time.Time
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.statement_timestamp()`).Scan(&committed); err != nil {
		return rot, fmt.Errorf("pgcap: rotate the host key of schema %q: the key is rotated, but reading the server's clock failed: %w: restart the hosts", hostSchema, err)
	}
	n, err := endBackends(ctx, conn, roles, committed)
	rot.Ended += n
	if err != nil {
		return rot, fmt.Errorf("pgcap: rotate the host key of schema %q: the key is rotated, but ending the plugin roles' backends failed: %w: end them (pg_terminate_backend) or restart the hosts", hostSchema, err)
	}
	return rot, nil
}

// Bounds of a rotation's transactions: a lock one waits for longer than
// rotateLockWait (a plugin's open transaction that altered its role, or
// granted on its schema, whose backend began again) fails the attempt,
// and rotateTries attempts, each ending the plugin roles' backends again,
// fail the rotation. rotateLockWait is a variable so that a test can
// hold a lock past it without waiting 15 s.
var rotateLockWait = 5 * time.Second

const rotateTries = 3

// pluginRolesSQL lists the plugin roles of the host schema $1: the roles
// named as roleName names them that provisionRole granted EXECUTE on the
// host's put_row. A role the operator granted USAGE on the host schema,
// to read its sessions, is not one.
const pluginRolesSQL = `SELECT DISTINCT a.grantee FROM pg_catalog.pg_proc p
	JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace, pg_catalog.aclexplode(p.proacl) a
	JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
	WHERE n.nspname = $1 AND p.proname = 'put_row' AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
		AND r.rolname LIKE 'wasmhist\_%'`

// endTries bounds endBackends's rounds, each waiting up to a second for
// the backends it ends.
const endTries = 10

type queryRower interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// everyBackend, as endBackends's before, ends every backend whenever it
// started.
var everyBackend = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// endBackends ends every backend of roles but this one that started
// before before, waiting for each to exit, until none is left, and
// returns how many ended.
func endBackends(ctx context.Context, q queryRower, roles []uint32, before time.Time) (int, error) {
	ended := 0
	for round := 1; ; round++ {
		// Inside a transaction pg_stat_activity is a snapshot taken at
		// its first read, unless cleared.
		var n, left int
		if err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(a.pid, 1000)), count(*)
			FROM pg_catalog.pg_stat_clear_snapshot() c, pg_catalog.pg_stat_activity a
			WHERE a.usesysid = ANY($1) AND a.pid <> pg_catalog.pg_backend_pid() AND a.backend_start < $2`, roles, before).Scan(&n, &left); err != nil {
			return ended, err
		}
		ended += n
		if left == n {
			return ended, nil
		}
		if round == endTries {
			return ended, fmt.Errorf("%d backends of the plugin roles did not end in %d rounds", left-n, endTries)
		}
	}
}

// hostTables checks that a host has provisioned the host schema qh, and
// sets the transaction's lock timeout and takes the host lock.
func hostTables(ctx context.Context, tx pgx.Tx, qh string) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL`, qh+".host_key").Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return errors.New("no host has provisioned it in this database (it has no host_key table): check the connection string's database and the host schema")
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = `+pgMillis(rotateLockWait)); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, txn.PostgresLock(qh))
	return err
}

// pluginRoles returns the oids and names of the plugin roles of hostSchema.
func pluginRoles(ctx context.Context, tx pgx.Tx, hostSchema string) ([]uint32, []string, error) {
	rows, err := tx.Query(ctx, `SELECT r.oid, r.rolname FROM pg_catalog.pg_roles r WHERE r.oid IN (`+pluginRolesSQL+`)`, hostSchema)
	if err != nil {
		return nil, nil, err
	}
	var oids []uint32
	var names []string
	var oid uint32
	var name string
	_, err = pgx.ForEachRow(rows, []any{&oid, &name}, func() error {
		oids, names = append(oids, oid), append(names, name)
		return nil
	})
	return oids, names, err
}

// loginLimitsTable records, while a rotation has the plugin roles' logins
// off, each role's connection limit before (by oid, which a rename keeps),
// so that the limits an operator set come back with the logins.
const loginLimitsTable = "login_limits"

// lockOut is the rotation's first transaction: it ends the plugin roles'
// backends, which may hold their roles' rows (a plugin's ALTER ROLE in an
// open transaction) and make a provisioning host wait while it holds the
// host lock, then takes the host lock, records each role's connection
// limit (one an interrupted rotation recorded stays) and sets it to 0. A
// role whose row a new backend took meanwhile is waited for briefly, its
// backends ended again, and tried again.
func lockOut(ctx context.Context, tx pgx.Tx, hostSchema string) (int, error) {
	qh := pgx.Identifier{hostSchema}.Sanitize()
	oids, names, err := pluginRoles(ctx, tx, hostSchema)
	if err != nil {
		return 0, err
	}
	// New backends may still log in until this commits: the second
	// transaction ends those.
	ended, err := endBackends(ctx, tx, oids, everyBackend)
	if err != nil {
		return ended, err
	}
	if err := hostTables(ctx, tx, qh); err != nil {
		return ended, err
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS ` + qh + `.` + loginLimitsTable + ` (role oid PRIMARY KEY, connlimit integer NOT NULL)`,
		`REVOKE ALL ON ` + qh + `.` + loginLimitsTable + ` FROM PUBLIC`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return ended, err
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+qh+`.`+loginLimitsTable+` (role, connlimit)
		SELECT r.oid, r.rolconnlimit FROM pg_catalog.pg_roles r WHERE r.oid = ANY($1) ON CONFLICT DO NOTHING`, oids); err != nil {
		return ended, err
	}
	for i, name := range names {
		for attempt := 1; ; attempt++ {
			if _, err := tx.Exec(ctx, `SAVEPOINT login_off; SET LOCAL lock_timeout = '200ms'`); err != nil {
				return ended, err
			}
			_, err := tx.Exec(ctx, `ALTER ROLE `+pgx.Identifier{name}.Sanitize()+` CONNECTION LIMIT 0`)
			if err == nil {
				if _, err := tx.Exec(ctx, `RELEASE SAVEPOINT login_off`); err != nil {
					return ended, err
				}
				break
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "55P03" || attempt == loginOffTries {
				return ended, err
			}
			if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT login_off`); err != nil {
				return ended, err
			}
			n, err := endBackends(ctx, tx, oids[i:i+1], everyBackend)
			ended += n
			if err != nil {
				return ended, err
			}
		}
	}
	return ended, nil
}

// loginOffTries bounds lockOut's attempts at one role, each waiting up to
// 200 ms for its row.
const loginOffTries = 25

// setLimits gives the plugin roles lockOut recorded their connection
// limits back and forgets them.
func setLimits(ctx context.Context, tx pgx.Tx, qh string) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL`, qh+"."+loginLimitsTable).Scan(&exists); err != nil || !exists {
		return err
	}
	rows, err := tx.Query(ctx, `DELETE FROM `+qh+`.`+loginLimitsTable+` l USING pg_catalog.pg_roles r WHERE r.oid = l.role RETURNING r.rolname, l.connlimit`)
	if err != nil {
		return err
	}
	type limit struct {
		name string
		n    int
	}
	limits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (limit, error) {
		var l limit
		return l, r.Scan(&l.name, &l.n)
	})
	if err != nil {
		return err
	}
	for _, l := range limits {
		if _, err := tx.Exec(ctx, `ALTER ROLE `+pgx.Identifier{l.name}.Sanitize()+` CONNECTION LIMIT `+strconv.Itoa(l.n)); err != nil {
			return err
		}
	}
	return nil
}

// restoreLogins is setLimits after a rotation failed: on a connection of
// its own (the rotation's may be broken) and a context of its own (the
// caller's may have ended: an operator's Ctrl-C), tried three times.
func restoreLogins(ctx context.Context, cfg *pgx.ConnConfig, qh string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var err error
	for range 3 {
		var conn *pgx.Conn
		if conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
			continue
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = `+pgMillis(rotateLockWait)); err != nil {
				return err
			}
			return setLimits(ctx, tx, qh)
		})
		conn.Close(ctx)
		if err == nil {
			return nil
		}
	}
	return err
}

// retiredFunctions are the host functions of the versions before key
// rotation that this version does not make: their hosts grant get_row
// when they provision a role, and the oldest call fire_deferred with the
// key in a statement the plugin's triggers run in.
var retiredFunctions = []string{"get_row(text, text, text)", "fire_deferred(text)", "fire_deferred(text, text)", "command_id(text)", "command_probes_done(text)"}

// rotate is the rotation's second transaction: with the plugin roles'
// logins off, it ends their backends, so that none holds a lock it needs
// or writes a journal row under a name it renames; it stores a new key,
// made by the server and read back (a parameter may be logged, a result
// is not), renames the tenants' schemas and roles, gives every plugin role
// the password the key derives and its logins back, renames away the
// functions older hosts grant and call (a rename, which no object that
// depends on them can refuse, where a drop would wait for a plugin's view
// of one to go), and records the layout older programs refuse. It returns
// what it did and the plugin roles.
func rotate(ctx context.Context, tx pgx.Tx, hostSchema string) (Rotation, []uint32, error) {
	var rot Rotation
	qh := pgx.Identifier{hostSchema}.Sanitize()
	if err := hostTables(ctx, tx, qh); err != nil {
		return rot, nil, err
	}
	roles, names, err := pluginRoles(ctx, tx, hostSchema)
	if err != nil {
		return rot, nil, err
	}
	if rot.Ended, err = endBackends(ctx, tx, roles, everyBackend); err != nil {
		return rot, nil, err
	}
	// A journal row written from here to the commit waits for it, and is
	// then its role's by the new name.
	if _, err := tx.Exec(ctx, `LOCK TABLE `+qh+`.journal IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return rot, nil, err
	}
	var key, db string
	if err := tx.QueryRow(ctx, `UPDATE `+qh+`.host_key SET key = `+newKeySQL+` RETURNING key, pg_catalog.current_database()`).Scan(&key, &db); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return rot, nil, errors.New("it has no host key yet: a host makes one at its first call")
		}
		return rot, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT schema, prefix, tenant FROM `+qh+`.tenants`)
	if err != nil {
		return rot, nil, err
	}
	type tenant struct{ schema, prefix, name string }
	tenants, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tenant, error) {
		var t tenant
		return t, r.Scan(&t.schema, &t.prefix, &t.name)
	})
	if err != nil {
		return rot, nil, err
	}
	renamed := map[string]string{}
	for _, t := range tenants {
		to := tenantSchema(key, t.prefix, t.name)
		if to == t.schema {
			continue
		}
		if err := renameTenant(ctx, tx, qh, t.schema, to, roleName(db, t.schema), roleName(db, to)); err != nil {
			return rot, nil, fmt.Errorf("rename the schema of tenant %q of %q: %w", t.name, t.prefix, err)
		}
		renamed[roleName(db, t.schema)] = roleName(db, to)
		rot.Tenants++
	}
	for _, name := range names {
		if to, ok := renamed[name]; ok {
			name = to
		}
		// As a SCRAM verifier: the statement may be logged.
		if _, err := tx.Exec(ctx, `ALTER ROLE `+pgx.Identifier{name}.Sanitize()+` PASSWORD `+quoteLiteral(scramVerifier(password(key, name)))); err != nil {
			return rot, nil, fmt.Errorf("ALTER ROLE %s PASSWORD: %w", pgx.Identifier{name}.Sanitize(), err)
		}
		rot.Roles++
	}
	if err := setLimits(ctx, tx, qh); err != nil {
		return rot, nil, err
	}
	retired := make([]string, len(retiredFunctions))
	for i, f := range retiredFunctions {
		retired[i] = quoteLiteral(qh + "." + f)
	}
	for _, q := range []string{
		`DO $d$ DECLARE s text; f regprocedure; BEGIN
			FOREACH s IN ARRAY ARRAY[` + strings.Join(retired, ", ") + `]::text[] LOOP
				f := pg_catalog.to_regprocedure(s);
				IF f IS NOT NULL THEN
					EXECUTE pg_catalog.format('ALTER FUNCTION %s RENAME TO %I', f, 'retired_' || f::oid);
				END IF;
			END LOOP;
		END $d$`,
		// And a host of theirs that starts refuses the database.
		`INSERT INTO ` + qh + `.store_version (version) SELECT ` + strconv.Itoa(txn.PostgresRotatedLayout) + `
			WHERE (SELECT max(version) FROM ` + qh + `.store_version) < ` + strconv.Itoa(txn.PostgresRotatedLayout),
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return rot, nil, fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return rot, roles, nil
}

// newKeySQL makes a host key on the server, 64 hex digits (244 random
// bits from two version 4 UUIDs), so that it is never a parameter.
const newKeySQL = `pg_catalog.replace(pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text, '-', '')`

// renameTenant moves a tenant from schema from and role fromRole to
// schema to and role toRole, with its journal rows and its row of the
// tenants table; a schema or role already moved, or never made, stays.
func renameTenant(ctx context.Context, tx pgx.Tx, qh, from, to, fromRole, toRole string) error {
	var oldSchema, newSchema, oldRole, newRole bool
	if err := tx.QueryRow(ctx, `SELECT
			EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = $1), EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = $2),
			EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $3), EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $4)`,
		from, to, fromRole, toRole).Scan(&oldSchema, &newSchema, &oldRole, &newRole); err != nil {
		return err
	}
	if oldSchema && newSchema || oldRole && newRole {
		return fmt.Errorf("both %s and %s exist: drop the one that is not the tenant's", from, to)
	}
	stmts := []string{`UPDATE ` + qh + `.tenants SET schema = ` + quoteLiteral(to) + ` WHERE schema = ` + quoteLiteral(from)}
	if oldSchema {
		stmts = append(stmts, `ALTER SCHEMA `+pgx.Identifier{from}.Sanitize()+` RENAME TO `+pgx.Identifier{to}.Sanitize())
	}
	if oldRole {
		qr := pgx.Identifier{toRole}.Sanitize()
		stmts = append(stmts,
			`ALTER ROLE `+pgx.Identifier{fromRole}.Sanitize()+` RENAME TO `+qr,
			// What provisioning sets; its connections pin it as well.
			`ALTER ROLE `+qr+` SET search_path = `+pgx.Identifier{to}.Sanitize(),
			`UPDATE `+qh+`.journal SET owner = `+quoteLiteral(toRole)+` WHERE owner = `+quoteLiteral(fromRole))
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return nil
}

// checkKey fails with ErrKeyRotated, and marks db stale, when the host
// key in the database is no longer db's; it runs in an admin transaction
// under the host schema's lock, before provisioning anything the key
// derives (a password, a tenant's schema).
func (db *database) checkKey(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, txn.PostgresLock(db.qhost())); err != nil {
		return err
	}
	rotated, err := db.readKey(ctx, tx)
	if err != nil {
		return err
	}
	if rotated {
		return db.rotated()
	}
	return nil
}

// keyRotated reports whether the host key was rotated since db read it,
// asking the admin connection; it marks db stale if so. It is asked only
// after a failure that a rotation explains: the host functions refusing
// the key, or a plugin role that cannot connect.
func (db *database) keyRotated(ctx context.Context) bool {
	if db.stale.Load() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hostLimit)
	defer cancel()
	rotated, err := db.readKey(ctx, db.admin)
	return err == nil && rotated
}

// readKey reads the host key through q and reports whether it is no
// longer db's, marking db stale if so. The key is compared here, not in a
// statement: a parameter may be logged.
func (db *database) readKey(ctx context.Context, q queryRower) (rotated bool, err error) {
	var key string
	if err := q.QueryRow(ctx, `SELECT k.key FROM `+db.qhost()+`.host_key k`).Scan(&key); err != nil {
		return false, err
	}
	if hmac.Equal([]byte(key), db.keyBytes) {
		return false, nil
	}
	db.stale.Store(true)
	return true, nil
}

// rotatedFault is err, a failure to begin a session that a key rotation
// caused, as the host's fault (see capability.HostFault).
func rotatedFault(err error) error {
	if !errors.Is(err, ErrKeyRotated) {
		return err
	}
	return &capability.HostFault{Plugin: abi.Errorf(abi.CodeUnavailable, "sql: %v", err), Cause: err}
}

// rotatedRequest is the error of a request that met the rotation, as the
// plugin saw it (ae), made the host's fault.
func (db *database) rotatedRequest(ae *abi.Error) error {
	return &capability.HostFault{Plugin: ae, Cause: db.rotated()}
}

// rotated is the error of a call that failed because the key was rotated.
func (db *database) rotated() error {
	return fmt.Errorf("pgcap: %s: %w after this host read it: this call fails, and the next one reads the new key", db.name, ErrKeyRotated)
}
