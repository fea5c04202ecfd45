package pgcap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// Limits bound what one sql request may do, the same as the SQLite
// capability's; see sqlwire.Limits.
type Limits = sqlwire.Limits

// ErrClosed is returned for a request after the Store was closed.
var ErrClosed = errors.New("pgcap: store closed")

// Store is a Host's backend of the capability: per named database an
// admin pool, which provisions, and a pool per role, which serves the
// plugins. A Host has one Store and closes it with itself.
type Store struct {
	mu  sync.Mutex
	dbs map[string]*database
	// retired are the databases replaced after a key rotation, closing
	// as their calls end.
	retired []*database
	closed  bool
}

// NewStore returns an empty Store.
func NewStore() *Store { return &Store{dbs: map[string]*database{}} }

// Close closes every pool. Sessions still open fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, db := range s.dbs {
		db.close()
	}
	for _, db := range s.retired {
		db.close()
	}
	s.dbs, s.retired = nil, nil
	return nil
}

// database is one named PostgreSQL database.
type database struct {
	name       string
	dsn        string // the admin DSN, to tell two grants' apart; never printed
	hostSchema string

	// ready is closed when init ended; err is its outcome.
	ready chan struct{}
	err   error
	admin *pgxpool.Pool
	key   string // the host key, hex; never printed
	// keyBytes is key as a bind parameter (pgx only reads it).
	keyBytes []byte
	// stale is set once the key was found rotated (see RotateKey): the
	// Store then serves its database's calls from a new database.
	stale atomic.Bool
	db    string // current_database()
	// sql are the host's statements naming the host schema.
	sql hostSQL

	mu    sync.Mutex
	roles map[string]*role // by schema
	// closing: close has taken roles; no role is added after.
	closing bool
}

// role is one plugin schema's role and its pool.
type role struct {
	schema, name string
	// legacy is a tenant schema's name before tenant names became opaque
	// (prefix__tenant), which provisioning renames (see migrateTenant).
	legacy string
	ready  chan struct{}
	err    error
	pool   *pgxpool.Pool
}

// database returns the named database, connecting and provisioning the
// host schema on first use.
func (s *Store) database(ctx context.Context, c *Config) (*database, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	db, ok := s.dbs[c.Name]
	if ok && db.stale.Load() {
		// Its pools close once the calls that hold their connections end.
		s.retired = append(s.retired, db)
		go func(old *database) {
			old.close()
			s.mu.Lock()
			s.retired = slices.DeleteFunc(s.retired, func(d *database) bool { return d == old })
			s.mu.Unlock()
		}(db)
		ok = false
	}
	if !ok {
		db = &database{name: c.Name, dsn: c.AdminDSN, hostSchema: c.hostSchema(), ready: make(chan struct{}), roles: map[string]*role{}}
		db.sql = newHostSQL(db.qhost())
		s.dbs[c.Name] = db
		go db.init(context.WithoutCancel(ctx))
	}
	s.mu.Unlock()
	if db.dsn != c.AdminDSN || db.hostSchema != c.hostSchema() {
		return nil, fmt.Errorf("pgcap: connection %q is granted twice with different settings: give each database its own name", c.Name)
	}
	select {
	case <-db.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("pgcap: %s: %w", c.Name, ctx.Err())
	}
	if db.err != nil {
		// A later call tries again: the server may have been down.
		s.mu.Lock()
		if s.dbs[c.Name] == db {
			delete(s.dbs, c.Name)
		}
		s.mu.Unlock()
		return nil, db.err
	}
	return db, nil
}

func (db *database) close() {
	<-db.ready
	// Not under mu while a pool waits for its connections: a call that
	// holds one may be waiting for mu.
	db.mu.Lock()
	db.closing = true
	roles := make([]*role, 0, len(db.roles))
	for _, r := range db.roles {
		roles = append(roles, r)
	}
	db.mu.Unlock()
	for _, r := range roles {
		<-r.ready
		if r.pool != nil {
			r.pool.Close()
		}
	}
	// Last: the calls those connections served use it until they end
	// (to end a stuck backend, to watch lock waits).
	if db.admin != nil {
		db.admin.Close()
	}
}

// poolConfig parses the admin DSN, with connections that cancel a
// statement whose context ends (instead of closing the connection) and
// fall back to closing it when the server does not answer within a second.
func poolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors quote the DSN, password included.
		return nil, errors.New("the admin connection string does not parse")
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: time.Second}
	}
	cfg.MaxConnIdleTime = time.Minute
	return cfg, nil
}

func (db *database) init(ctx context.Context) {
	defer close(db.ready)
	fail := func(err error) {
		db.err = fmt.Errorf("pgcap: %s: %w", db.name, err)
		if db.admin != nil {
			db.admin.Close()
			db.admin = nil
		}
	}
	cfg, err := poolConfig(db.dsn)
	if err != nil {
		fail(err)
		return
	}
	cfg.MaxConns = 2
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if db.admin, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		fail(err)
		return
	}
	err = txn.PostgresBootstrapRun(ctx, pgx.Identifier{db.hostSchema}.Sanitize(), func(ctx context.Context, q string) error {
		_, err := db.admin.Exec(ctx, q)
		return err
	})
	if err != nil {
		fail(fmt.Errorf("provision host schema %q: %w", db.hostSchema, err))
		return
	}
	err = txn.PostgresRetry(ctx, func() error {
		return pgx.BeginFunc(ctx, db.admin, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT current_database()`).Scan(&db.db); err != nil {
				return err
			}
			key, err := provisionHost(ctx, tx, db.hostSchema)
			db.key, db.keyBytes = key, []byte(key)
			return err
		})
	})
	if err != nil {
		fail(fmt.Errorf("provision host schema %q: %w", db.hostSchema, err))
	}
}

// role returns the pool of the role owning schema, provisioning both on
// first use.
func (db *database) role(ctx context.Context, schema string) (*role, error) {
	return db.tenantRole(ctx, schema, "")
}

// tenantRole is role for a tenant's schema, whose name before tenant
// names became opaque was legacy.
func (db *database) tenantRole(ctx context.Context, schema, legacy string) (*role, error) {
	db.mu.Lock()
	if db.closing {
		db.mu.Unlock()
		return nil, fmt.Errorf("pgcap: %s: its connections are closing, after a key rotation or at the Store's Close: try the call again", db.name)
	}
	r, ok := db.roles[schema]
	if !ok {
		r = &role{schema: schema, legacy: legacy, name: roleName(db.db, schema), ready: make(chan struct{})}
		db.roles[schema] = r
		go db.initRole(context.WithoutCancel(ctx), r)
	}
	db.mu.Unlock()
	select {
	case <-r.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("pgcap: %s: schema %q: %w", db.name, schema, ctx.Err())
	}
	if r.err != nil {
		db.mu.Lock()
		if db.roles[schema] == r {
			delete(db.roles, schema)
		}
		db.mu.Unlock()
		return nil, r.err
	}
	return r, nil
}

func (db *database) initRole(ctx context.Context, r *role) {
	defer close(r.ready)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := db.provisionRole(ctx, r); err != nil {
		r.err = fmt.Errorf("pgcap: %s: provision schema %q: %w", db.name, r.schema, err)
		if errors.Is(err, ErrKeyRotated) {
			r.err = err
		}
		return
	}
	cfg, err := poolConfig(db.dsn)
	if err != nil {
		r.err = fmt.Errorf("pgcap: %s: %w", db.name, err)
		return
	}
	// The plugin's connections log in as its role: a SET ROLE on an admin
	// connection could be undone with RESET ROLE.
	cfg.ConnConfig.User = r.name
	cfg.ConnConfig.Password = password(db.key, r.name)
	cfg.ConnConfig.RuntimeParams = runtimeParams(r.schema)
	cfg.MaxConns = 8
	if r.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		r.err = fmt.Errorf("pgcap: %s: schema %q: %w", db.name, r.schema, err)
	}
}

// loginsOff reports whether role's connection limit is 0, as a key
// rotation sets it while it runs (see lockOut).
func (db *database) loginsOff(ctx context.Context, role string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hostLimit)
	defer cancel()
	var limit int
	err := db.admin.QueryRow(ctx, `SELECT r.rolconnlimit FROM pg_catalog.pg_roles r WHERE r.rolname = $1`, role).Scan(&limit)
	return err == nil && limit == 0
}

// Bounds of a plugin connection the server enforces even when the host is
// gone; see runtimeParams.
const (
	// checkInterval is how often a running statement checks that its
	// client is still there (client_connection_check_interval).
	checkInterval = time.Second
	// idleInTransaction ends a transaction left idle that long: longer
	// than any run's model calls, between which a run's transaction waits.
	idleInTransaction = time.Hour
	// statementCeiling bounds a statement when no transaction of the host
	// set a tighter bound (each sets its request limit, see begin).
	statementCeiling = 5 * time.Minute
)

// runtimeParams are the startup parameters of the plugin connections of
// schema. Settings given in the startup packet take precedence over a
// role's (ALTER ROLE ... SET, which the plugin may run on its own role)
// and are what RESET ALL returns to, so every call starts with
// them whatever the plugin set before.
func runtimeParams(schema string) map[string]string {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }
	return map[string]string{
		"application_name":                    "wasmhist sql " + schema,
		"search_path":                         schema, // a-z, 0-9 and _ only: see Config.Check
		"client_encoding":                     "UTF8",
		"bytea_output":                        "hex",
		"default_transaction_read_only":       "off",
		"default_transaction_isolation":       "read committed",
		"default_transaction_deferrable":      "off",
		"statement_timeout":                   ms(statementCeiling),
		"lock_timeout":                        "0",
		"idle_in_transaction_session_timeout": ms(idleInTransaction),
		"idle_session_timeout":                "0",
		"client_connection_check_interval":    ms(checkInterval),
		"tcp_keepalives_idle":                 "30",
		"tcp_keepalives_interval":             "10",
		"tcp_keepalives_count":                "3",
		"work_mem":                            "4MB",
		"maintenance_work_mem":                "64MB",
	}
}

func (db *database) provisionRole(ctx context.Context, r *role) error {
	return pgx.BeginFunc(ctx, db.admin, func(tx pgx.Tx) error {
		// Never a password or a tenant's schema of a key rotated away.
		if err := db.checkKey(ctx, tx); err != nil {
			return err
		}
		if r.legacy != "" {
			if err := migrateTenant(ctx, tx, db.hostSchema, r.schema, r.name, r.legacy, roleName(db.db, r.legacy)); err != nil {
				return fmt.Errorf("give tenant schema %q its opaque name: %w", r.legacy, err)
			}
		}
		return provisionRole(ctx, tx, db.hostSchema, r.schema, r.name, password(db.key, r.name))
	})
}

// acquire takes a connection of the role, provisioning the role again
// once if the server refuses its password (a plugin may change its own
// role's password; the host's derived one is the only one that counts).
func (db *database) acquire(ctx context.Context, r *role) (*pgxpool.Conn, error) {
	c, err := r.pool.Acquire(ctx)
	var pe *pgconn.PgError
	if err != nil && errors.As(err, &pe) && pe.Code == "28P01" {
		if perr := db.provisionRole(ctx, r); perr != nil {
			if errors.Is(perr, ErrKeyRotated) {
				return nil, perr
			}
			return nil, fmt.Errorf("pgcap: %s: schema %q: %w", db.name, r.schema, perr)
		}
		c, err = r.pool.Acquire(ctx)
	}
	if err != nil {
		var pe *pgconn.PgError
		if errors.Is(err, ErrKeyRotated) || errors.As(err, &pe) && strings.HasPrefix(pe.Code, "28") && db.keyRotated(ctx) {
			// A tenant's role renamed, or a password no longer the key's.
			return nil, db.rotated()
		}
		if pe != nil && pe.Code == "53300" && db.loginsOff(ctx, r.name) {
			return nil, fmt.Errorf("pgcap: %s: the role of schema %q may not log in: a rotation of the host key is under way, or was interrupted (if none runs, run one again: wasmhist postgres rotate-key): %w", db.name, r.schema, err)
		}
		return nil, fmt.Errorf("pgcap: %s: connect as the role of schema %q: %w", db.name, r.schema, err)
	}
	return c, nil
}
