package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// A stand-in for a database behind the sql capability, for the failure
// cases: each call's rows are pending in a savepoint of its own, kept when
// the call succeeds and dropped when it fails, as the host keeps a call's
// work (SPEC section 8.2, Transactions); the rows a run's calls kept stay
// pending until the run commits, as the host's transactions keep them
// (host.InRun); a call outside a run commits its rows when it succeeds.
type fakeDB struct {
	mu   sync.Mutex
	rows map[abi.SessionFacts][]json.RawMessage
}

// fakeRun is the pending rows of one run, or of one call within its
// parent (a savepoint).
type fakeRun struct {
	parent  *fakeRun
	mu      sync.Mutex
	pending map[abi.SessionFacts][]json.RawMessage
}

type runKey struct{}

func newFakeRun(parent *fakeRun) *fakeRun {
	return &fakeRun{parent: parent, pending: map[abi.SessionFacts][]json.RawMessage{}}
}

// keep moves run's rows into its parent.
func (run *fakeRun) keep() {
	run.mu.Lock()
	defer run.mu.Unlock()
	run.parent.mu.Lock()
	defer run.parent.mu.Unlock()
	for key, msgs := range run.pending {
		run.parent.pending[key] = append(run.parent.pending[key], msgs...)
	}
}

// errInterrupted is a write after its call's deadline, which the host
// would have stopped: the fake's instance crashes there.
var errInterrupted = errors.New("fakeDB: the call's deadline passed: interrupted")

func newFakeDB() *fakeDB { return &fakeDB{rows: map[abi.SessionFacts][]json.RawMessage{}} }

func (db *fakeDB) read(ctx context.Context, key abi.SessionFacts) []json.RawMessage {
	db.mu.Lock()
	rows := slices.Clone(db.rows[key])
	db.mu.Unlock()
	var chain []*fakeRun
	for run, _ := ctx.Value(runKey{}).(*fakeRun); run != nil; run = run.parent {
		chain = append(chain, run)
	}
	for _, run := range slices.Backward(chain) {
		run.mu.Lock()
		rows = append(rows, run.pending[key]...)
		run.mu.Unlock()
	}
	return rows
}

// write puts msgs in the call's savepoint, unless the call's deadline has
// passed.
func (db *fakeDB) write(ctx context.Context, key abi.SessionFacts, msgs []json.RawMessage) error {
	if pastDeadline(ctx) {
		return errInterrupted
	}
	run := ctx.Value(runKey{}).(*fakeRun)
	run.mu.Lock()
	run.pending[key] = append(run.pending[key], msgs...)
	run.mu.Unlock()
	return nil
}

func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

func (db *fakeDB) commitRows(key abi.SessionFacts, msgs []json.RawMessage) {
	db.mu.Lock()
	db.rows[key] = append(db.rows[key], msgs...)
	db.mu.Unlock()
}

func (db *fakeDB) commit(run *fakeRun) {
	for key, msgs := range run.pending {
		db.commitRows(key, msgs)
	}
}

// runHandlerSubject is a handlerSubject whose runs commit to db.
type runHandlerSubject struct {
	*handlerSubject
	db *fakeDB
}

func (s runHandlerSubject) InRun(ctx context.Context, commit bool, f func(context.Context) error) error {
	run := newFakeRun(nil)
	err := f(context.WithValue(ctx, runKey{}, run))
	if err == nil && commit {
		s.db.commit(run)
	}
	return err
}

// dbFactory makes subjects of providers built on one shared db. A call
// that its deadline interrupted crashed its instance: the subject's next
// call gets a new one, as the host's pool does.
func dbFactory(newProvider func(db *fakeDB) sdk.Provider) Factory {
	db := newFakeDB()
	return func(ctx context.Context) (Subject, error) {
		// One instance runs one call at a time (SPEC section 1).
		h, mu := sdk.Handler(newProvider(db)), new(sync.Mutex)
		s, err := newHandlerSubject(ctx, func(ctx context.Context, export string, input []byte) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			parent, _ := ctx.Value(runKey{}).(*fakeRun)
			call := newFakeRun(parent)
			out, err := h(context.WithValue(ctx, runKey{}, call), export, input)
			switch {
			case err == nil && parent != nil:
				call.keep()
			case err == nil:
				db.commit(call)
			case pastDeadline(ctx):
				h = sdk.Handler(newProvider(db))
			}
			return out, err
		})
		if err != nil {
			return nil, err
		}
		return runHandlerSubject{handlerSubject: s, db: db}, nil
	}
}

// dbProvider keeps history in the database, keyed by session and state
// key, and writes through the run: correct.
type dbProvider struct{ db *fakeDB }

func (dbProvider) Describe() abi.PluginInfo {
	return abi.PluginInfo{Name: "db", Version: "1", StateVersion: 1, StateSchema: json.RawMessage(`{"type":"object"}`)}
}

func (p dbProvider) Provide(ctx context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return &abi.ProvideResponse{Messages: p.db.read(ctx, req.Session)}, nil
}

func (p dbProvider) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	if err := p.db.write(ctx, req.Session, req.RequestMessages); err != nil {
		return nil, err
	}
	if err := p.db.write(ctx, req.Session, req.ResponseMessages); err != nil {
		return nil, err
	}
	return &abi.StoreResponse{}, nil
}

// selfCommitter commits its rows itself, outside the run it was called
// in, as a plugin with a connection of its own would.
type selfCommitter struct{ dbProvider }

func (p selfCommitter) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	p.db.commitRows(req.Session, slices.Concat(req.RequestMessages, req.ResponseMessages))
	return &abi.StoreResponse{}, nil
}

// rowCache writes through the run but keeps, in its instance, the rows it
// read or wrote last, and answers provide from them when it has them.
type rowCache struct {
	dbProvider
	cache map[abi.SessionFacts][]json.RawMessage
}

func newRowCache(db *fakeDB) sdk.Provider {
	return &rowCache{dbProvider: dbProvider{db}, cache: map[abi.SessionFacts][]json.RawMessage{}}
}

func (p *rowCache) Provide(ctx context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	rows, ok := p.cache[req.Session]
	if !ok {
		rows = p.db.read(ctx, req.Session)
		p.cache[req.Session] = rows
	}
	return &abi.ProvideResponse{Messages: slices.Clone(rows)}, nil
}

func (p *rowCache) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	if _, err := p.dbProvider.Store(ctx, req); err != nil {
		return nil, err
	}
	p.cache[req.Session] = p.db.read(ctx, req.Session)
	return &abi.StoreResponse{}, nil
}

// halfCommitter commits a store's request messages itself, at once, and
// writes its response messages through the run: a store stopped between
// the two leaves half of itself.
type halfCommitter struct{ dbProvider }

func (p halfCommitter) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	p.db.commitRows(req.Session, req.RequestMessages)
	if err := p.db.write(ctx, req.Session, req.ResponseMessages); err != nil {
		return nil, err
	}
	return &abi.StoreResponse{}, nil
}

// writeBehind keeps what store is given in its instance and writes it
// through the run at the instance's next store, to batch writes: provide
// reads the batch and the rows, so one instance looks right, and a crash
// of the next store loses the batch.
type writeBehind struct {
	dbProvider
	batch map[abi.SessionFacts][]json.RawMessage
}

func newWriteBehind(db *fakeDB) sdk.Provider {
	return &writeBehind{dbProvider: dbProvider{db}, batch: map[abi.SessionFacts][]json.RawMessage{}}
}

func (p *writeBehind) Provide(ctx context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	return &abi.ProvideResponse{Messages: slices.Concat(p.db.read(ctx, req.Session), p.batch[req.Session])}, nil
}

func (p *writeBehind) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	for key, msgs := range p.batch {
		if err := p.db.write(ctx, key, msgs); err != nil {
			return nil, err
		}
		delete(p.batch, key)
	}
	p.batch[req.Session] = slices.Concat(req.RequestMessages, req.ResponseMessages)
	return &abi.StoreResponse{}, nil
}
