package sqlcap

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"modernc.org/libc"
	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
)

// Limits bound what one sql request may do; see sqlwire.Limits.
type Limits = sqlwire.Limits

// Options configure how a Store opens databases. The zero value works.
type Options struct {
	// BusyTimeout is how long a statement waits for a writer of another
	// process (5 s).
	BusyTimeout time.Duration
	// Synchronous is SQLite's synchronous setting: "FULL" (the default; a
	// committed call survives power loss) or "NORMAL" (survives a crash of
	// the process but may lose the last commits on power loss).
	Synchronous string
	// Limits are the defaults of grants whose own Limits leave a field zero.
	Limits Limits
	// MaxOpenDatabases bounds the files the Store keeps open (64). Opening
	// one more closes the least recently used file no call is using, so a
	// host serving many tenants holds the files of its recent ones only.
	MaxOpenDatabases int
}

func (o Options) withDefaults() Options {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Synchronous == "" {
		o.Synchronous = "FULL"
	}
	o.Limits = o.Limits.WithDefaults()
	if o.MaxOpenDatabases <= 0 {
		o.MaxOpenDatabases = 64
	}
	return o
}

// ErrClosed is returned for a request after the Store was closed.
var ErrClosed = errors.New("sqlcap: store closed")

// Store owns the databases the sql capability serves, one pool of
// connections per file. A Host has one Store, which it closes with itself;
// grants of several plugins (or tenants) pointing at different files share
// it.
//
// Two Stores (of two Hosts) may serve one file: their writers then queue on
// SQLite's own lock, each BEGIN IMMEDIATE waiting up to BusyTimeout, instead
// of on the Store's queue.
type Store struct {
	opts Options

	mu     sync.Mutex
	dbs    map[string]*database
	tick   uint64 // orders uses, for least-recently-used eviction
	closed bool
}

// NewStore returns a Store.
func NewStore(opts Options) (*Store, error) {
	opts = opts.withDefaults()
	switch opts.Synchronous {
	case "FULL", "NORMAL", "EXTRA":
	default:
		return nil, fmt.Errorf("sqlcap: synchronous %q: want FULL, NORMAL or EXTRA", opts.Synchronous)
	}
	return &Store{opts: opts, dbs: make(map[string]*database)}, nil
}

// Close closes every database. Sessions still open fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, db := range s.dbs {
		errs = append(errs, db.sql.Close())
	}
	s.dbs = nil
	return errors.Join(errs...)
}

// database is one SQLite file with its connection pool.
type database struct {
	path string
	sql  *sql.DB
	// writer admits one writing transaction of this process at a time, so
	// writers queue in Go (woken in order, honouring the context) instead of
	// polling SQLite's busy handler.
	writer chan struct{}
	// users counts the calls using the database; only an unused one is
	// closed to make room.
	users    int
	lastUsed uint64
}

// open returns the database at path, opening it on first use.
func (s *Store) open(ctx context.Context, path string) (*database, error) {
	if path == "" {
		return nil, errors.New("sqlcap: the grant names no database file")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlcap: database path %q: %w", path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.tick++
	if db, ok := s.dbs[abs]; ok {
		db.users++
		db.lastUsed = s.tick
		return db, nil
	}
	if len(s.dbs) >= s.opts.MaxOpenDatabases {
		s.evictLocked()
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("sqlcap: open %s: %w", abs, err)
	}
	db := &database{
		path:   abs,
		sql:    sql.OpenDB(&connector{path: abs, opts: s.opts}),
		writer: make(chan struct{}, 1),
	}
	db.sql.SetMaxIdleConns(4)
	// Idle files close after a while, so a host serving many tenants does
	// not keep every file it ever opened.
	db.sql.SetConnMaxIdleTime(time.Minute)
	// Opening a connection creates the file and switches it to WAL, so a bad
	// path fails here, at the first call, with the path in the message.
	if err := db.sql.PingContext(ctx); err != nil {
		db.sql.Close()
		return nil, fmt.Errorf("sqlcap: open %s: %w", abs, err)
	}
	db.users, db.lastUsed = 1, s.tick
	s.dbs[abs] = db
	return db, nil
}

// done ends one call's use of db.
func (s *Store) done(db *database) {
	s.mu.Lock()
	db.users--
	s.mu.Unlock()
}

// evictLocked closes the least recently used database no call is using. If
// every one is in use, the Store goes over its bound until calls end.
func (s *Store) evictLocked() {
	var lru *database
	for _, db := range s.dbs {
		if db.users == 0 && (lru == nil || db.lastUsed < lru.lastUsed) {
			lru = db
		}
	}
	if lru != nil {
		delete(s.dbs, lru.path)
		lru.sql.Close()
	}
}

// OpenDatabases is the number of files the Store holds open.
func (s *Store) OpenDatabases() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dbs)
}

// limits fills the zero fields of l with the Store's defaults.
func (s *Store) limits(l Limits) Limits { return l.Or(s.opts.Limits) }

var drv = &sqlite.Driver{}

// maxValueBytes bounds a string or blob in a plugin's SQL (SQLite's
// SQLITE_LIMIT_LENGTH, by default a billion bytes): 32 MiB, the default
// memory of a whole plugin instance, which no larger value could reach.
const maxValueBytes = 32 << 20

// connector opens connections set up for plugin use.
type connector struct {
	path string
	opts Options
}

func (c *connector) Driver() driver.Driver { return drv }

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := drv.Open("file:" + c.path)
	if err != nil {
		return nil, err
	}
	inner, ok := dc.(sqlite.ExecQuerierContext)
	reg, ok2 := dc.(sqlite.AuthorizerRegisterer)
	if !ok || !ok2 {
		dc.Close()
		return nil, errors.New("sqlcap: the sqlite driver lacks the authorizer")
	}
	handle, err := sqliteHandle(dc)
	if err != nil {
		dc.Close()
		return nil, err
	}
	// No string or blob a plugin's SQL makes may pass maxValueBytes: one
	// expression (printf, randomblob, zeroblob, replace) otherwise builds
	// up to a gigabyte in the host's memory, between two of the progress
	// handler's checks of the call's deadline.
	tls := libc.NewTLS()
	sqlite3.Xsqlite3_limit(tls, handle, sqlite3.SQLITE_LIMIT_LENGTH, maxValueBytes)
	tls.Close()
	p := &policy{}
	if err := reg.RegisterAuthorizer(p.authorize); err != nil {
		dc.Close()
		return nil, fmt.Errorf("sqlcap: install authorizer: %w", err)
	}
	// trusted_schema=OFF keeps functions with side effects out of views and
	// triggers a previous plugin version may have left in the file. The
	// busy timeout goes first: switching a new file to WAL waits for
	// another process's lock like any statement.
	setup := []string{
		fmt.Sprintf("PRAGMA busy_timeout=%d", c.opts.BusyTimeout.Milliseconds()),
		"PRAGMA journal_mode=WAL",
		"PRAGMA synchronous=" + c.opts.Synchronous,
		"PRAGMA trusted_schema=OFF",
		"PRAGMA foreign_keys=ON",
	}
	deadline := time.Now().Add(c.opts.BusyTimeout)
	for _, q := range setup {
		for attempt := 1; ; attempt++ {
			rows, err := inner.QueryContext(ctx, q, nil)
			if err == nil {
				err = rows.Close()
			}
			if err == nil {
				break
			}
			// Switching a file to WAL needs an exclusive lock, and SQLite
			// answers SQLITE_BUSY at once, without its busy handler, when
			// waiting could deadlock (another connection converting the
			// same new file). Waiting here cannot deadlock: this
			// connection holds nothing yet.
			if sqliteCode(err) == sqlite3.SQLITE_BUSY && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(time.Duration(min(attempt, 20)) * 5 * time.Millisecond)
				continue
			}
			dc.Close()
			return nil, fmt.Errorf("sqlcap: %s: %w", q, err)
		}
	}
	return &conn{Conn: dc, inner: inner, policy: p, handle: handle, intr: newInterrupter(handle, c.opts.BusyTimeout)}, nil
}

// conn is a driver connection with its authorizer policy. database/sql only
// pools it; statements reach the inner connection through sql.Conn.Raw.
type conn struct {
	driver.Conn
	inner  sqlite.ExecQuerierContext
	policy *policy
	handle uintptr // the sqlite3* of the connection
	// intr interrupts the plugin's statements (interrupt.go).
	intr *interrupter
	// prepared are the statements the connection keeps (prepared.go).
	prepared map[preparedKey]preparedStmt
	// tls is the C thread state of the host's own calls into SQLite on
	// this connection (callTLS), made once: one per call was a malloc, two
	// maps and a registry entry, twice a plugin call.
	tls *libc.TLS
}

// callTLS returns the connection's C thread state for a call into SQLite
// from the goroutine that holds the connection (under sql.Conn.Raw, which
// holds it alone); an interrupt from another goroutine makes its own.
func (c *conn) callTLS() *libc.TLS {
	if c.tls == nil {
		c.tls = libc.NewTLS()
	}
	return c.tls
}

func (c *conn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.inner.ExecContext(ctx, q, args)
}

func (c *conn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.inner.QueryContext(ctx, q, args)
}

// ResetSession and IsValid let database/sql drop a connection the driver
// reports broken (e.g. after an interrupt left it unusable).
func (c *conn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *conn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}
