package pgcap

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// ErrKeyRotated is the cause of a call's failure when the host key was
// rotated (RotateKey) after this host read it: the call fails, and the
// host's next call reads the new key.
var ErrKeyRotated = errors.New("the host key was rotated")

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
	var rot Rotation
	if hostSchema == "" {
		hostSchema = DefaultHostSchema
	}
	if !validSchemaName(hostSchema) {
		return rot, fmt.Errorf("pgcap: rotate the host key: host schema %q: want 1 to 40 of a-z, 0-9 and _", hostSchema)
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
	in := func(f func(tx pgx.Tx) error) error {
		return txn.PostgresRetry(ctx, func() error { return pgx.BeginFunc(ctx, conn, f) })
	}
	var roles []uint32
	for try := 1; ; try++ {
		// First the plugin roles' logins go off, so that the backends the
		// rotation ends stay ended: a busy host reconnects within
		// milliseconds, with the old password until the rotation commits.
		err = in(func(tx pgx.Tx) error {
			var err error
			rot.Ended, err = lockOut(ctx, tx, hostSchema)
			return err
		})
		if err == nil {
			var n int
			err = in(func(tx pgx.Tx) error {
				var err error
				n, roles, err = rotate(ctx, tx, hostSchema, &rot)
				return err
			})
			rot.Ended += n
		}
		var pe *pgconn.PgError
		if err == nil || try == rotateTries || !errors.As(err, &pe) || pe.Code != "55P03" {
			break
		}
	}
	if err != nil {
		// The old key stays; the roles' logins come back.
		if rerr := in(func(tx pgx.Tx) error { return setLogins(ctx, tx, hostSchema, -1) }); rerr != nil {
			return fail(fmt.Errorf("%w; and giving the plugin roles their logins back failed: %w: run the rotation again", err, rerr))
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" {
			return fail(fmt.Errorf("%w: a lock was held for longer than %s, %d times: try again when the plugins' calls are fewer", err, rotateLockWait, rotateTries))
		}
		return fail(err)
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
// fail the rotation.
const (
	rotateLockWait = 5 * time.Second
	rotateTries    = 3
)

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

// endBackends ends every backend of roles but this one that started
// before before, waiting for each to exit, until none is left, and
// returns how many ended.
func endBackends(ctx context.Context, q queryRower, roles []uint32, before time.Time) (int, error) {
	ended := 0
	for try := 0; ; try++ {
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
		if try == endTries {
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

// setLogins sets every plugin role's connection limit: 0 turns its
// logins off, -1 (what provisioning leaves) back on.
func setLogins(ctx context.Context, tx pgx.Tx, hostSchema string, limit int) error {
	if err := hostTables(ctx, tx, pgx.Identifier{hostSchema}.Sanitize()); err != nil {
		return err
	}
	_, names, err := pluginRoles(ctx, tx, hostSchema)
	if err != nil {
		return err
	}
	for _, name := range names {
		if _, err := tx.Exec(ctx, `ALTER ROLE `+pgx.Identifier{name}.Sanitize()+` CONNECTION LIMIT `+strconv.Itoa(limit)); err != nil {
			return err
		}
	}
	return nil
}

// lockOut is the rotation's first transaction: it ends the plugin roles'
// backends, which may hold their roles' rows (a plugin's ALTER ROLE in an
// open transaction) and make a provisioning host wait while it holds the
// host lock, then takes the host lock and turns the roles' logins off.
func lockOut(ctx context.Context, tx pgx.Tx, hostSchema string) (int, error) {
	oids, _, err := pluginRoles(ctx, tx, hostSchema)
	if err != nil {
		return 0, err
	}
	// One round: new backends may still log in until this commits.
	var ended int
	if err := tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(a.pid, 1000))
		FROM pg_catalog.pg_stat_activity a WHERE a.usesysid = ANY($1) AND a.pid <> pg_catalog.pg_backend_pid()`, oids).Scan(&ended); err != nil {
		return 0, err
	}
	return ended, setLogins(ctx, tx, hostSchema, 0)
}

// rotate is the rotation's second transaction: with the plugin roles'
// logins off, it ends their backends, so that none holds a lock it needs
// or writes a journal row under a name it renames; it stores a new key,
// made by the server and read back (a parameter may be logged, a result
// is not), renames the tenants' schemas and roles, gives every plugin role
// the password the key derives and its logins back, drops the host
// functions older hosts grant and call with the key, and records the
// layout older programs refuse. It returns how many backends it ended
// and the plugin roles.
func rotate(ctx context.Context, tx pgx.Tx, hostSchema string, rot *Rotation) (int, []uint32, error) {
	qh := pgx.Identifier{hostSchema}.Sanitize()
	if err := hostTables(ctx, tx, qh); err != nil {
		return 0, nil, err
	}
	roles, names, err := pluginRoles(ctx, tx, hostSchema)
	if err != nil {
		return 0, nil, err
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.clock_timestamp()`).Scan(&now); err != nil {
		return 0, nil, err
	}
	ended, err := endBackends(ctx, tx, roles, now.Add(time.Hour))
	if err != nil {
		return ended, nil, err
	}
	// A journal row written from here to the commit waits for it, and is
	// then its role's by the new name.
	if _, err := tx.Exec(ctx, `LOCK TABLE `+qh+`.journal IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return ended, nil, err
	}
	var key, db string
	if err := tx.QueryRow(ctx, `UPDATE `+qh+`.host_key SET key = `+newKeySQL+` RETURNING key, pg_catalog.current_database()`).Scan(&key, &db); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ended, nil, errors.New("it has no host key yet: a host makes one at its first call")
		}
		return ended, nil, err
	}
	rows, err := tx.Query(ctx, `SELECT schema, prefix, tenant FROM `+qh+`.tenants`)
	if err != nil {
		return ended, nil, err
	}
	type tenant struct{ schema, prefix, name string }
	tenants, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tenant, error) {
		var t tenant
		return t, r.Scan(&t.schema, &t.prefix, &t.name)
	})
	if err != nil {
		return ended, nil, err
	}
	renamed := map[string]string{}
	for _, t := range tenants {
		to := tenantSchema(key, t.prefix, t.name)
		if to == t.schema {
			continue
		}
		if err := renameTenant(ctx, tx, qh, t.schema, to, roleName(db, t.schema), roleName(db, to)); err != nil {
			return ended, nil, fmt.Errorf("rename the schema of tenant %q of %q: %w", t.name, t.prefix, err)
		}
		renamed[roleName(db, t.schema)] = roleName(db, to)
		rot.Tenants++
	}
	for _, name := range names {
		if to, ok := renamed[name]; ok {
			name = to
		}
		// As a SCRAM verifier: the statement may be logged.
		if _, err := tx.Exec(ctx, `ALTER ROLE `+pgx.Identifier{name}.Sanitize()+` CONNECTION LIMIT -1 PASSWORD `+quoteLiteral(scramVerifier(password(key, name)))); err != nil {
			return ended, nil, fmt.Errorf("ALTER ROLE %s PASSWORD: %w", pgx.Identifier{name}.Sanitize(), err)
		}
		rot.Roles++
	}
	stmts := []string{
		// Hosts of the versions before key rotation grant get_row when
		// they provision a role (this version no longer makes it), and
		// the oldest call fire_deferred with the key in a statement the
		// plugin's triggers run in: gone, a host of theirs still running
		// can neither give a role the old key's password again nor
		// commit a write.
		`DROP FUNCTION IF EXISTS ` + qh + `.get_row(text, text, text), ` + qh + `.fire_deferred(text), ` + qh + `.fire_deferred(text, text), ` + qh + `.command_id(text), ` + qh + `.command_probes_done(text)`,
		// And one that starts refuses the database.
		`INSERT INTO ` + qh + `.store_version (version) SELECT ` + strconv.Itoa(txn.PostgresRotatedLayout) + `
			WHERE (SELECT max(version) FROM ` + qh + `.store_version) < ` + strconv.Itoa(txn.PostgresRotatedLayout),
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return ended, nil, fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	return ended, roles, nil
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
	qh := db.qhost()
	if _, err := tx.Exec(ctx, txn.PostgresLock(qh)); err != nil {
		return err
	}
	var key string
	if err := tx.QueryRow(ctx, `SELECT k.key FROM `+qh+`.host_key k`).Scan(&key); err != nil {
		return err
	}
	if !hmac.Equal([]byte(key), db.keyBytes) {
		db.stale.Store(true)
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
	// Compared here, not in a statement: a parameter may be logged.
	var key string
	if err := db.admin.QueryRow(ctx, `SELECT k.key FROM `+db.qhost()+`.host_key k`).Scan(&key); err != nil || hmac.Equal([]byte(key), db.keyBytes) {
		return false
	}
	db.stale.Store(true)
	return true
}

// rotated is the error of a call that failed because the key was rotated.
func (db *database) rotated() error {
	return fmt.Errorf("pgcap: %s: %w after this host read it: this call fails, and the next one reads the new key", db.name, ErrKeyRotated)
}
