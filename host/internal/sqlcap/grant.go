package sqlcap

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// PathFunc chooses the database file of one export call, e.g. per tenant
// from a value the embedder put in the context. It must not depend on
// anything the plugin controls.
type PathFunc func(ctx context.Context) (string, error)

// FixedPath is a PathFunc that always chooses path.
func FixedPath(path string) PathFunc {
	return func(context.Context) (string, error) { return path, nil }
}

// NewGrant returns a grant of the sql capability on the database path
// chooses, bounded by limits (zero fields take the serving Store's). The
// grant holds no database: each call is served by its Host's Store.
func NewGrant(path PathFunc, limits Limits) capability.Grant {
	return &grant{path: path, limits: limits}
}

type grant struct {
	path   PathFunc
	limits Limits
}

func (g *grant) Capability() abi.Capability { return abi.CapabilitySQL }

// Begin takes a connection for the export call. The transaction itself opens
// with the first request, which says whether it will write.
func (g *grant) Begin(ctx context.Context, b capability.Backend) (capability.Session, error) {
	store, ok := b.(*Store)
	if !ok {
		return nil, fmt.Errorf("sqlcap: backend of unexpected type %T", b)
	}
	path, err := g.path(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlcap: choose database: %w", err)
	}
	db, err := store.open(ctx, path)
	if err != nil {
		return nil, err
	}
	c, err := db.sql.Conn(ctx)
	if err != nil {
		store.done(db)
		return nil, fmt.Errorf("sqlcap: connect %s: %w", db.path, err)
	}
	return &session{store: store, db: db, limits: store.limits(g.limits), conn: c, calls: txn.NewCalls()}, nil
}

// Kind is the sql capability as a Host registers it: the host function and
// a Store per Host.
var Kind = capability.Kind{
	Func:       Func,
	NewBackend: func() (capability.Backend, error) { return NewStore(Options{}) },
}

// Func is the host function serving abi.CapabilitySQL. It hands each
// request to the session of the calling plugin's grant, so that it serves
// the grants of every engine registered for sql (see capability.Kind).
var Func = capability.RequestFunc(abi.CapabilitySQL, abi.SQLFunction)

// Request implements capability.Requester.
func (s *session) Request(ctx context.Context, request []byte) ([]byte, error) {
	return s.run(ctx, request)
}

// session is one export call's use of one database: a pooled connection
// and, from the first request on, a transaction.
type session struct {
	store  *Store
	db     *database
	limits Limits
	conn   *sql.Conn

	began  bool
	writer bool // holds db.writer
	// failed poisons the call after an error that may have rolled the
	// transaction back (interrupt, I/O, busy): later requests repeat it and
	// End rolls back even when the export call succeeded.
	failed error

	dc    *conn     // the driver connection of conn, once a request asked
	calls txn.Calls // of the txn.Txn the session joined (join.go)
	ended bool
	// mark is what the connection had changed when the call that began
	// the transaction started (nil if it could not be read): a call that
	// took the write lock and changed nothing ends like one that read.
	mark *changeMark
}
