// Package pggrant is the sql capability (abi.CapabilitySQL) on PostgreSQL:
// plugins run parameterised SQL in a schema of their own of a database the
// host owns, chosen by the operator, never by the plugin.
//
// Importing the package links the pgx driver into the program and
// registers the capability with package host next to package sqlgrant's
// SQLite one: a plugin sees one sql capability, and each response names
// its dialect ("postgres" here). A program that does not import the
// package does not link pgx.
//
//	opts := host.LoadOptions{Grants: []host.Grant{
//		pggrant.New(pggrant.Config{Name: "main", AdminDSN: os.Getenv("WASMHIST_PG"), Schema: "history"}),
//	}}
//
// On first use the host provisions, through the admin connection: the host
// schema (HostSchema, "wasmhist" unless set: the session store's, see
// host/store/pgstore) with a random host key readable by the admin only,
// and per schema a role that logs in with a password derived from that key
// (HMAC-SHA256, sent to the server as a SCRAM verifier), inherits nothing,
// is a member of no role and owns only its schema, its search_path. It
// revokes TEMPORARY on the database and CREATE on schema public from
// PUBLIC, and EXECUTE on dblink's functions and USAGE on foreign-data
// wrappers and servers (it refuses to provision a role that could still
// open a connection, saying what to revoke). Every host with the admin DSN
// derives the same passwords, so hosts on many machines need no
// coordination. The plugin's statements run on connections that log in as
// that role; PostgreSQL's privileges, not SQL parsing, keep it from other
// schemas and tenants, the host's tables, server files and programs, role
// changes and extensions. A run that changes its role (a password, a
// setting), grants its objects to another role or PUBLIC or keeps a large
// object is rolled back: its commit fails.
//
// All statements of one export call run in one transaction (READ
// COMMITTED), committed only when the call succeeds, each in a savepoint
// so that a failed statement undoes only itself. A plugin's BEGIN, COMMIT,
// ROLLBACK or SAVEPOINT fails its call with permission_denied; a COMMIT
// cannot commit anything early (a deferred guard the host alone passes
// fails it). Within a run (every agent run of package host/agent, or
// host.InRun) the calls share one transaction, each call in a savepoint,
// which the agent commits together with the session row when the session
// store is host/store/pgstore on the same database with the same Name:
// the txn target is "postgres:<Name>".
package pggrant

import (
	"context"
	"time"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/pgcap"
	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
)

func init() {
	if err := capability.Register(pgcap.Kind); err != nil {
		panic(err)
	}
}

// Config chooses a grant's database, schema and bounds.
type Config struct {
	// Name names the database: in the txn target "postgres:<Name>" and in
	// messages. Required; never a secret. Give the session store
	// (pgstore.Config.Name) on the same database the same Name.
	Name string
	// AdminDSN is a connection string for a role that may create roles
	// and schemas: a superuser, or a role with CREATEROLE that owns the
	// database (as managed services give). The host provisions with it;
	// plugins never use it.
	AdminDSN string
	// Schema is the plugin's schema (1 to 40 of a-z, 0-9, _). With
	// TenantFunc, the prefix of one schema per tenant: Schema__ and an
	// HMAC of the tenant, which no plugin role can map back (the host
	// schema's tenants table, readable by the admin, does).
	Schema string
	// HostSchema is the host's schema; empty means "wasmhist", the
	// session store's default. It must be the session store's for a run's
	// session row to commit with its plugin's writes.
	HostSchema string
	// TenantFunc, when set, chooses the tenant of each export call (1 to
	// 20 of a-z, 0-9, _) from its context, giving each tenant a schema
	// and role of its own. It must not depend on anything the plugin
	// controls.
	TenantFunc func(ctx context.Context) (string, error)
	// Limits bound each request of the plugin; zero fields take defaults.
	Limits Limits
}

// Limits bound one sql request of a plugin. Zero fields take defaults.
// Its fields are sqlwire.Limits's, in the same order: New converts one
// to the other.
type Limits struct {
	// MaxRows bounds the rows one request returns (10000).
	MaxRows int
	// MaxResultBytes bounds the encoded result of one request (4 MiB).
	MaxResultBytes int
	// MaxRequestBytes bounds the request (4 MiB).
	MaxRequestBytes int
	// MaxStatements bounds the statements of one request (256).
	MaxStatements int
	// Timeout bounds one request (2 s); a statement still running then is
	// cancelled and the plugin sees a resource_exhausted error, whatever
	// statement_timeout the plugin set.
	Timeout time.Duration
}

// New returns a grant of the sql capability on the PostgreSQL database cfg
// names. A Config missing its Name, AdminDSN or a valid Schema fails every
// call that uses sql, saying what is missing.
func New(cfg Config) host.Grant {
	g := pgcap.NewGrant(pgcap.Config{
		Name:       cfg.Name,
		AdminDSN:   cfg.AdminDSN,
		Schema:     cfg.Schema,
		HostSchema: cfg.HostSchema,
		Tenant:     cfg.TenantFunc,
		Limits:     sqlwire.Limits(cfg.Limits),
	})
	return capability.Seal(g).(host.Grant)
}

// ErrKeyRotated is the cause of a call's failure when the host key was
// rotated (RotateKey) after the host read it: that call fails, and the
// host's next call reads the new key.
var ErrKeyRotated = hosterr.ErrKeyRotated

// Rotation is what RotateKey changed.
type Rotation struct {
	// Roles is the number of plugin roles given the new key's password.
	Roles int
	// Tenants is the number of tenant schemas, with their roles, renamed
	// to the names the new key derives.
	Tenants int
	// Ended is the number of plugin-role backends ended.
	Ended int
}

// RotateKey replaces the host key of hostSchema ("wasmhist" when empty)
// in the database adminDSN connects to, as that admin. The key derives
// every plugin role's password and every tenant's schema name, and the
// host's functions check it; a deployment that has reason to think the key
// known outside its hosts (a plugin that read it, a leaked backup of the
// host schema) rotates it, and the old key then opens nothing.
//
// It ends the plugin roles' backends and turns their logins off; then, in
// one transaction, it gives every plugin role the password the new key
// derives and its logins back, and every tenant schema and its role the
// names it derives (the data, grants and journal rows stay theirs). Hosts
// of this version may run meanwhile: their calls fail while the logins
// are off (a second or so, longer when plugins hold locks), as do the
// calls in flight and the first call of a host that still holds the old
// key, without committing anything; the host's next call uses the new
// key. A rotation that fails keeps the old key and gives the logins back.
// Programs of the versions before RotateKey refuse the database
// afterwards ("upgrade the program"): upgrade every host first.
func RotateKey(ctx context.Context, adminDSN, hostSchema string) (Rotation, error) {
	r, err := pgcap.RotateKey(ctx, adminDSN, hostSchema)
	return Rotation{Roles: r.Roles, Tenants: r.Tenants, Ended: r.Ended}, err
}
