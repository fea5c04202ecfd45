package txn

import (
	"context"
	"fmt"
)

// Calls is what a database connection joined to a Txn keeps about the calls
// that use it, the same on every engine: the calls take turns on the
// connection; the call that begins the transaction keeps it open only if
// it left work to commit (so a read holds no snapshot or lock across the
// model call that follows); each later call runs inside a savepoint, so
// that a failed call undoes its own part and the earlier calls' work stays
// pending.
type Calls struct {
	turn  chan struct{}
	later bool // the current call found the transaction open
}

// NewCalls returns the Calls of a new connection.
func NewCalls() Calls { return Calls{turn: make(chan struct{}, 1)} }

// Conn is the engine's side of Calls.
type Conn interface {
	// Where names the database in errors, package first ("sqlcap: /a.db").
	Where() string
	// Began reports whether the connection's transaction is open.
	Began() bool
	// Failed is the error that lost the transaction, or nil.
	Failed() error
	// Fail records err as the error that lost the transaction.
	Fail(err error)
	// HostExec runs a statement of the host's on the connection.
	HostExec(ctx context.Context, sql string) error
	// End commits (ok) or rolls back the transaction.
	End(ctx context.Context, ok bool) error
	// Pending reports whether the transaction, begun by the call that
	// ends, holds work to commit with the Txn.
	Pending(ctx context.Context) bool
	// CallStarts is called once the call has its turn, before its
	// savepoint.
	CallStarts(ctx context.Context)
	// CallKept is called when the call's work is kept for the Txn's
	// commit.
	CallKept()
}

// savepoint is the name of a later call's savepoint, in every engine.
const savepoint = "wasmhist_call"

// Start starts one call's use of c: it waits for the previous call's End,
// then opens the call's savepoint if the transaction is open.
func (k *Calls) Start(ctx context.Context, c Conn) error {
	select {
	case k.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for another call's use: %w", c.Where(), ctx.Err())
	}
	k.later = c.Began()
	c.CallStarts(ctx)
	if k.later && c.Failed() == nil {
		if err := c.HostExec(ctx, "SAVEPOINT "+savepoint); err != nil {
			<-k.turn
			return fmt.Errorf("%s: savepoint: %w", c.Where(), err)
		}
	}
	return nil
}

// End ends the call's use of c, keeping its work when ok and undoing it
// otherwise, and reports whether c holds work pending for the Txn.
func (k *Calls) End(ctx context.Context, c Conn, ok bool) (pending bool, err error) {
	ctx = context.WithoutCancel(ctx)
	defer func() { <-k.turn }()
	if !c.Began() {
		return false, c.End(ctx, ok)
	}
	if k.later {
		// A later call: its part goes or stays, the earlier calls' work
		// stays pending either way.
		k.later = false
		switch failed := c.Failed(); {
		case failed != nil:
			return true, failed
		case ok:
			c.CallKept()
			if err := c.HostExec(ctx, "RELEASE SAVEPOINT "+savepoint); err != nil {
				c.Fail(err)
				return true, fmt.Errorf("%s: release savepoint: %w", c.Where(), err)
			}
		default:
			for _, q := range []string{"ROLLBACK TO SAVEPOINT " + savepoint, "RELEASE SAVEPOINT " + savepoint} {
				if err := c.HostExec(ctx, q); err != nil {
					c.Fail(err)
					return true, fmt.Errorf("%s: roll back a failed call: %w", c.Where(), err)
				}
			}
		}
		return true, nil
	}
	// The call that began the transaction.
	if !ok || c.Failed() != nil {
		return false, c.End(ctx, ok)
	}
	if c.Pending(ctx) {
		c.CallKept()
		return true, nil
	}
	return false, c.End(ctx, true)
}
