package pgcap

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
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
// (DefaultHostSchema when empty) of the database adminDSN connects to,
// in one transaction under the host schema's lock: every plugin role's
// password is derived again from the new key, and every tenant's schema
// and role get the names the new key derives (their data, grants and
// journal rows stay theirs). Then it ends every backend of a plugin role.
//
// A key known outside the host (for example read by a plugin from a host
// that leaked it) then opens nothing: the host's functions refuse it, and
// no role's password derives from it. Hosts running meanwhile notice at
// their next use of the key or of a connection, fail that call (and the
// calls in flight, whose backends end), and read the new key for the call
// after; nothing of a failed call commits.
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
	var fresh [32]byte
	rand.Read(fresh[:])
	key := hex.EncodeToString(fresh[:])
	var roles []uint32
	for try := 1; ; try++ {
		err = txn.PostgresRetry(ctx, func() error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				var err error
				rot, roles, err = rotate(ctx, tx, hostSchema, key)
				return err
			})
		})
		var pe *pgconn.PgError
		if err == nil || try == rotateTries || !errors.As(err, &pe) || pe.Code != "55P03" {
			break
		}
	}
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" {
			return fail(fmt.Errorf("%w: a lock was held for longer than %s, %d times: try again when the plugins' calls are fewer", err, rotateLockWait, rotateTries))
		}
		return fail(err)
	}
	// Committed: no new connection of a plugin role logs in with a
	// password of the old key. The backends of those made before, and of
	// one that was logging in as the transaction committed, end here.
	n, err := endBackends(ctx, conn, roles)
	rot.Ended += n
	if err != nil {
		return rot, fmt.Errorf("pgcap: rotate the host key of schema %q: the key is rotated, but ending the plugin roles' backends failed: %w: end them (pg_terminate_backend) or restart the hosts", hostSchema, err)
	}
	return rot, nil
}

// Bounds of a rotation's transaction: a lock it waits for longer than
// rotateLockWait (a plugin's open transaction that altered its role, or
// granted on its schema) fails the attempt, and rotateTries attempts, each
// after ending the plugin roles' backends again, fail the rotation.
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

// endBackends ends every backend of roles but this one, waiting for each
// to exit, until none is left, and returns how many ended.
func endBackends(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, roles []uint32) (int, error) {
	ended, tries := 0, 0
	for {
		// Inside a transaction pg_stat_activity is a snapshot taken at
		// its first read, unless cleared.
		var n, left int
		if err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(a.pid, 1000)), count(*)
			FROM pg_catalog.pg_stat_clear_snapshot() c, pg_catalog.pg_stat_activity a
			WHERE a.usesysid = ANY($1) AND a.pid <> pg_catalog.pg_backend_pid()`, roles).Scan(&n, &left); err != nil {
			return ended, err
		}
		ended += n
		if left == 0 {
			return ended, nil
		}
		if tries++; tries == endTries {
			return ended, fmt.Errorf("%d backends of the plugin roles did not end in %d rounds", left, endTries)
		}
	}
}

// rotate is RotateKey's transaction: it ends the plugin roles' backends,
// so that none holds a lock it needs or writes a journal row under a name
// it renames, renames the tenants' schemas and roles, gives every plugin
// role the password key derives, drops the host functions that older
// hosts call with the key, records the layout older programs refuse and
// stores key. It returns the plugin roles.
func rotate(ctx context.Context, tx pgx.Tx, hostSchema, key string) (Rotation, []uint32, error) {
	var rot Rotation
	qh := pgx.Identifier{hostSchema}.Sanitize()
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL`, qh+".host_key").Scan(&exists); err != nil {
		return rot, nil, err
	}
	if !exists {
		return rot, nil, fmt.Errorf("no host has provisioned it in this database (it has no host_key table): check the connection string's database and the host schema")
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = `+pgMillis(rotateLockWait)); err != nil {
		return rot, nil, err
	}
	if _, err := tx.Exec(ctx, txn.PostgresLock(qh)); err != nil {
		return rot, nil, err
	}
	var old, db string
	if err := tx.QueryRow(ctx, `SELECT k.key, pg_catalog.current_database() FROM `+qh+`.host_key k`).Scan(&old, &db); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return rot, nil, errors.New("it has no host key yet: a host makes one at its first call")
		}
		return rot, nil, err
	}
	rows, err := tx.Query(ctx, pluginRolesSQL, hostSchema)
	if err != nil {
		return rot, nil, err
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return rot, nil, err
	}
	n, err := endBackends(ctx, tx, roles)
	rot.Ended += n
	if err != nil {
		return rot, nil, err
	}
	// A journal row written from here to the commit waits for it, and is
	// then its role's by the new name.
	if _, err := tx.Exec(ctx, `LOCK TABLE `+qh+`.journal IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return rot, nil, err
	}
	rows, err = tx.Query(ctx, `SELECT schema, prefix, tenant FROM `+qh+`.tenants`)
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
	for _, t := range tenants {
		to := tenantSchema(key, t.prefix, t.name)
		if to == t.schema {
			continue
		}
		if err := renameTenant(ctx, tx, qh, t.schema, to, roleName(db, t.schema), roleName(db, to)); err != nil {
			return rot, nil, fmt.Errorf("rename the schema of tenant %q of %q: %w", t.name, t.prefix, err)
		}
		rot.Tenants++
	}
	rows, err = tx.Query(ctx, `SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid = ANY($1)`, roles)
	if err != nil {
		return rot, nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return rot, nil, err
	}
	for _, name := range names {
		// As a SCRAM verifier: the statement may be logged.
		if _, err := tx.Exec(ctx, `ALTER ROLE `+pgx.Identifier{name}.Sanitize()+` PASSWORD `+quoteLiteral(scramVerifier(password(key, name)))); err != nil {
			return rot, nil, fmt.Errorf("ALTER ROLE %s PASSWORD: %w", pgx.Identifier{name}.Sanitize(), err)
		}
		rot.Roles++
	}
	stmts := []string{
		// Hosts of the versions before key rotation grant these when they
		// provision a role, and call fire_deferred with the key in a
		// statement the plugin's triggers run in: gone, a host of theirs
		// still running can neither give a role the old key's password
		// again nor commit a write.
		`DROP FUNCTION IF EXISTS ` + qh + `.fire_deferred(text), ` + qh + `.fire_deferred(text, text), ` + qh + `.command_id(text), ` + qh + `.command_probes_done(text)`,
		// And one that starts refuses the database.
		`INSERT INTO ` + qh + `.store_version (version) SELECT ` + strconv.Itoa(txn.PostgresRotatedLayout) + `
			WHERE (SELECT max(version) FROM ` + qh + `.store_version) < ` + strconv.Itoa(txn.PostgresRotatedLayout),
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return rot, nil, fmt.Errorf("%s: %w", firstLine(q), err)
		}
	}
	_, err = tx.Exec(ctx, `UPDATE `+qh+`.host_key SET key = $1`, key)
	return rot, roles, err
}

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
