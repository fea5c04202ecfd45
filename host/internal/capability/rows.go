package capability

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// RowReader is a Session of a Joiner that can read the host's rows of its
// database in a read-only transaction of its own, outside any export call.
type RowReader interface {
	Session
	// ReadRow returns the revision of the host row (t, id), or an error
	// wrapping txn.ErrNotFound.
	ReadRow(ctx context.Context, t txn.Table, id string) (int64, error)
}

// ErrNoRows reports a grant whose sessions cannot read host rows.
var ErrNoRows = errors.New("capability: the grant's storage keeps no host rows")

// HeldRevision returns the newest revision of session id that the database
// of g records in the host's rows (its session row or its journal row), or
// 0 when it holds neither. It reads in a transaction of its own and changes
// nothing.
func (b *Backends) HeldRevision(ctx context.Context, g Grant, id string) (int64, error) {
	be, err := b.backendOf(g)
	if err != nil {
		return 0, err
	}
	s, err := g.Begin(ctx, be)
	if err != nil {
		return 0, err
	}
	defer s.End(context.WithoutCancel(ctx), false)
	rr, ok := s.(RowReader)
	if !ok {
		return 0, fmt.Errorf("%w: %T", ErrNoRows, s)
	}
	var newest int64
	for _, t := range []txn.Table{txn.Sessions, txn.Journal} {
		rev, err := rr.ReadRow(ctx, t, id)
		switch {
		case errors.Is(err, txn.ErrNotFound):
		case err != nil:
			return 0, err
		default:
			newest = max(newest, rev)
		}
	}
	return newest, nil
}
