package pgcap

import (
	"context"
	"errors"
	"fmt"
	"regexp"
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
	// per tenant (Schema + "__" + tenant).
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

var (
	schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)
	tenantName = regexp.MustCompile(`^[a-z0-9_]{1,20}$`)
)

// Check reports what is wrong with c, if anything.
func (c *Config) Check() error {
	switch {
	case c.Name == "":
		return errors.New("pgcap: the grant has no Name")
	case c.AdminDSN == "":
		return fmt.Errorf("pgcap: %s: the grant has no admin DSN", c.Name)
	case !schemaName.MatchString(c.Schema):
		return fmt.Errorf("pgcap: %s: schema %q: want 1 to 40 of a-z, 0-9 and _, not starting with a digit", c.Name, c.Schema)
	case !schemaName.MatchString(c.hostSchema()):
		return fmt.Errorf("pgcap: %s: host schema %q: want 1 to 40 of a-z, 0-9 and _", c.Name, c.HostSchema)
	case c.Schema == c.hostSchema() || c.Schema == "public" || c.Schema == "pg_catalog" || c.Schema == "information_schema":
		return fmt.Errorf("pgcap: %s: schema %q is not the plugin's to own", c.Name, c.Schema)
	}
	return nil
}

// schema returns the plugin schema of the call in ctx.
func (c *Config) schema(ctx context.Context) (string, error) {
	if err := c.Check(); err != nil {
		return "", err
	}
	if c.Tenant == nil {
		return c.Schema, nil
	}
	t, err := c.Tenant(ctx)
	if err != nil {
		return "", fmt.Errorf("pgcap: %s: choose tenant: %w", c.Name, err)
	}
	if !tenantName.MatchString(t) {
		return "", fmt.Errorf("pgcap: %s: tenant %q: want 1 to 20 of a-z, 0-9 and _", c.Name, t)
	}
	return c.Schema + "__" + t, nil
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
func (g *grant) Begin(ctx context.Context, b capability.Backend) (capability.Session, error) {
	store, ok := b.(*Store)
	if !ok {
		return nil, fmt.Errorf("pgcap: backend of unexpected type %T", b)
	}
	schema, err := g.cfg.schema(ctx)
	if err != nil {
		return nil, err
	}
	db, err := store.database(ctx, &g.cfg)
	if err != nil {
		return nil, err
	}
	r, err := db.role(ctx, schema)
	if err != nil {
		return nil, err
	}
	c, err := db.acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	s := &session{db: db, role: r, conn: c, pc: c.Conn().PgConn(), limits: g.cfg.Limits, lockWait: g.cfg.LockWait, calls: txn.NewCalls()}
	s.deadline, _ = ctx.Deadline()
	return s, nil
}

// Kind is the sql capability on PostgreSQL as a Host registers it.
var Kind = capability.Kind{
	Func:       capability.RequestFunc(abi.CapabilitySQL, abi.SQLFunction),
	Engine:     Engine,
	NewBackend: func() (capability.Backend, error) { return NewStore(), nil },
}
