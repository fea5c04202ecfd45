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
	// ReadRows returns, for each of tables, the revision and the data
	// (the session, as session.Encode wrote it) of the host row (t, id),
	// a zero Row when there is none, read in one transaction.
	ReadRows(ctx context.Context, id string, tables ...txn.Table) ([]Row, error)
}

// Row is a host row read by a RowReader.
type Row struct {
	Revision int64
	Data     []byte
}

// ErrNoRows reports a grant whose sessions cannot read host rows.
var ErrNoRows = errors.New("capability: the grant's storage keeps no host rows")

// Held returns the newest revision of session id that the database of g
// records in the host's rows (its session row or its journal row) with
// that row's data (the session, as session.Encode wrote it), or 0 and nil
// when it holds neither. It reads both rows in one read transaction of its
// own and changes nothing.
func (b *Backends) Held(ctx context.Context, g Grant, id string) (int64, []byte, error) {
	be, err := b.backendOf(g)
	if err != nil {
		return 0, nil, err
	}
	s, err := g.Begin(ctx, be)
	if err != nil {
		return 0, nil, err
	}
	defer s.End(context.WithoutCancel(ctx), false)
	rr, ok := s.(RowReader)
	if !ok {
		return 0, nil, fmt.Errorf("%w: %T", ErrNoRows, s)
	}
	rows, err := rr.ReadRows(ctx, id, txn.Sessions, txn.Journal)
	if err != nil {
		return 0, nil, err
	}
	var (
		newest int64
		data   []byte
	)
	for _, r := range rows {
		if r.Revision > newest {
			newest, data = r.Revision, r.Data
		}
	}
	return newest, data, nil
}
