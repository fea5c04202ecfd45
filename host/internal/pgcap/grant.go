package pgcap

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// Engine is the capability.Kind engine of PostgreSQL grants.
const Engine = "postgres"

// DefaultHostSchema is the schema of the host's own tables (the session
// store's, host/store/pgstore's default).
const DefaultHostSchema = "wasmhist"

// Config is one grant of the sql capability on PostgreSQL.
type Config struct {
	// Name names the database in txn targets and messages; never a secret.
	Name string
	// AdminDSN connects as a role that may create roles and schemas (a
	// superuser, or CREATEROLE and owner of the database); the host uses
	// it to provision and to write its own rows' functions, never for a
	// plugin's statements.
	AdminDSN string
	// Schema is the plugin's schema; with Tenant, the prefix of one schema
	// per tenant (Schema + "__" + an opaque suffix, see tenantSchema).
	Schema string
	// HostSchema is the host's schema (DefaultHostSchema when empty).
	HostSchema string
	// Tenant, when set, chooses the tenant of each export call from its
	// context; it must not depend on anything the plugin controls.
	Tenant func(ctx context.Context) (string, error)
	// Limits bound each request.
	Limits Limits
	// LockWait bounds the time the statements of one call wait for locks
	// other transactions hold, which is not the plugin's (see busy.go);
	// DefaultLockWait when zero.
	LockWait time.Duration
}

func (c *Config) hostSchema() string {
	if c.HostSchema == "" {
		return DefaultHostSchema
	}
	return c.HostSchema
}

// validSchemaName reports whether s matches ^[a-z_][a-z0-9_]{0,39}$ and
// validTenantName whether s matches ^[a-z0-9_]{1,20}$, by hand: Check runs
// on every call of a plugin (Target, Begin and Accept of each transaction),
// and a regular expression there was about 8 thousand instructions of a
// turn. FuzzNames proves them equal to those patterns.
func validSchemaName(s string) bool {
	if len(s) == 0 || len(s) > 40 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	return lowerDigitUnderscore(s)
}

func validTenantName(s string) bool {
	return len(s) >= 1 && len(s) <= 20 && lowerDigitUnderscore(s)
}

func lowerDigitUnderscore(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Check reports what is wrong with c, if anything.
func (c *Config) Check() error {
	switch {
	case c.Name == "":
		return errors.New("pgcap: the grant has no Name")
	case c.AdminDSN == "":
		return fmt.Errorf("pgcap: %s: the grant has no admin DSN", c.Name)
	case !validSchemaName(c.Schema):
		return fmt.Errorf("pgcap: %s: schema %q: want 1 to 40 of a-z, 0-9 and _, not starting with a digit", c.Name, c.Schema)
	case !validSchemaName(c.hostSchema()):
		return fmt.Errorf("pgcap: %s: host schema %q: want 1 to 40 of a-z, 0-9 and _", c.Name, c.HostSchema)
	case c.Schema == c.hostSchema() || c.Schema == "public" || c.Schema == "pg_catalog" || c.Schema == "information_schema":
		return fmt.Errorf("pgcap: %s: schema %q is not the plugin's to own", c.Name, c.Schema)
	}
	return nil
}

// schema returns the plugin schema of the call in ctx on a database
// whose host key is key and, for a tenant's schema, the name it had before
// tenant names became opaque (see tenantSchema).
func (c *Config) schema(ctx context.Context, key string) (schema, legacy string, err error) {
	if err := c.Check(); err != nil {
		return "", "", err
	}
	if c.Tenant == nil {
		return c.Schema, "", nil
	}
	t, err := c.Tenant(ctx)
	if err != nil {
		return "", "", fmt.Errorf("pgcap: %s: choose tenant: %w", c.Name, err)
	}
	if !validTenantName(t) {
		return "", "", fmt.Errorf("pgcap: %s: tenant %q: want 1 to 20 of a-z, 0-9 and _", c.Name, t)
	}
	return tenantSchema(key, c.Schema, t), c.Schema + "__" + t, nil
}

// tenantSchema is the schema of tenant t of the grants on schema prefix:
// the prefix and 80 bits of an HMAC of both under the host key, so that
// no plugin role reads a tenant's name in the catalog (schema, role and
// application names). The host schema's tenants table, readable by the
// admin only, maps each back to its tenant.
func tenantSchema(key, prefix, t string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("wasmhist tenant schema\x00" + prefix + "\x00" + t))
	return prefix + "__" + hex.EncodeToString(m.Sum(nil))[:20]
}

// NewGrant returns a grant of the sql capability on PostgreSQL.
func NewGrant(cfg Config) capability.Grant {
	cfg.Limits = cfg.Limits.WithDefaults()
	if cfg.LockWait <= 0 {
		cfg.LockWait = DefaultLockWait
	}
	return &grant{cfg: cfg}
}

type grant struct{ cfg Config }

var _ capability.Engined = (*grant)(nil)

func (g *grant) Capability() abi.Capability { return abi.CapabilitySQL }

// Engine implements capability.Engined.
func (g *grant) Engine() string { return Engine }

// Begin takes a connection of the call's role. The transaction begins with
// the first request.
//
// Connecting and provisioning (the host schema, the role; hosts starting
// together take turns on the host schema's lock) are the host's work, not
// the plugin's: the call's clock stands still meanwhile, as during a lock
// wait (see busy.go), for up to provisionWait.
func (g *grant) Begin(ctx context.Context, b capability.Backend) (capability.Session, error) {
	store, ok := b.(*Store)
	if !ok {
		return nil, fmt.Errorf("pgcap: backend of unexpected type %T", b)
	}
	if err := g.cfg.Check(); err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	resume := capability.Pause(ctx)
	defer resume()
	ctx, cancel := context.WithTimeout(ctx, provisionWait)
	defer cancel()
	db, err := store.database(ctx, &g.cfg)
	if err != nil {
		return nil, err
	}
	schema, legacy, err := g.cfg.schema(ctx, db.key)
	if err != nil {
		return nil, err
	}
	r, err := db.tenantRole(ctx, schema, legacy)
	if err != nil {
		return nil, rotatedFault(err)
	}
	c, err := db.acquire(ctx, r)
	if err != nil {
		return nil, rotatedFault(err)
	}
	pc := c.Conn().PgConn()
	s := &session{db: db, role: r, conn: c, pc: pc, cache: statementsOf(pc), limits: g.cfg.Limits, lockWait: g.cfg.LockWait, calls: txn.NewCalls()}
	s.deadline = deadline
	return s, nil
}

// maxMessage is the longest message a plugin's request reads from the
// server: a row twice the request's result limit (a value's text on the
// wire, such as a bytea's hex, can be twice its JSON), and room for the
// rest. pgx would otherwise read a row of up to 1 GiB into memory before
// the result's limit sees it; past the bound it ends the connection
// instead (mapError), and the run's statements are undone.
func maxMessage(l Limits) int { return 2*l.MaxResultBytes + 64<<10 }

// pgxMaxMessage is pgx's own bound (pgproto3.NewFrontend's, PostgreSQL's
// PQ_LARGE_MESSAGE_LIMIT), which the host's reads keep.
const pgxMaxMessage = 0x3fffffff - 1

// provisionWait bounds what a call waits for its connection, provisioning
// included: provisioning's own bound (see database.init).
const provisionWait = 30 * time.Second

// Kind is the sql capability on PostgreSQL as a Host registers it.
var Kind = capability.Kind{
	Func:       capability.RequestFunc(abi.CapabilitySQL, abi.SQLFunction),
	Engine:     Engine,
	NewBackend: func() (capability.Backend, error) { return NewStore(), nil },
}
