package sdktest

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// A stand-in for a database behind the sql capability, for the failure
// cases: rows written within a run stay pending until the run commits, as
// the host's transactions keep them (host.InRun); rows written outside a
// run commit at once.
type fakeDB struct {
	mu   sync.Mutex
	rows map[abi.SessionFacts][]json.RawMessage
}

// fakeRun is one run's pending rows.
type fakeRun struct {
	mu      sync.Mutex
	pending map[abi.SessionFacts][]json.RawMessage
}

type runKey struct{}

func newFakeDB() *fakeDB { return &fakeDB{rows: map[abi.SessionFacts][]json.RawMessage{}} }

func (db *fakeDB) read(ctx context.Context, key abi.SessionFacts) []json.RawMessage {
	db.mu.Lock()
	rows := slices.Clone(db.rows[key])
	db.mu.Unlock()
	if run, ok := ctx.Value(runKey{}).(*fakeRun); ok {
		run.mu.Lock()
		rows = append(rows, run.pending[key]...)
		run.mu.Unlock()
	}
	return rows
}

func (db *fakeDB) write(ctx context.Context, key abi.SessionFacts, msgs []json.RawMessage) {
	if run, ok := ctx.Value(runKey{}).(*fakeRun); ok {
		run.mu.Lock()
		run.pending[key] = append(run.pending[key], msgs...)
		run.mu.Unlock()
		return
	}
	db.commitRows(key, msgs)
}

func (db *fakeDB) commitRows(key abi.SessionFacts, msgs []json.RawMessage) {
	db.mu.Lock()
	db.rows[key] = append(db.rows[key], msgs...)
	db.mu.Unlock()
}

// runHandlerSubject is a handlerSubject whose runs commit to db.
type runHandlerSubject struct {
	*handlerSubject
	db *fakeDB
}

func (s runHandlerSubject) InRun(ctx context.Context, commit bool, f func(context.Context) error) error {
	run := &fakeRun{pending: map[abi.SessionFacts][]json.RawMessage{}}
	err := f(context.WithValue(ctx, runKey{}, run))
	if err == nil && commit {
		for key, msgs := range run.pending {
			s.db.commitRows(key, msgs)
		}
	}
	return err
}

// dbFactory makes subjects of providers built on one shared db.
func dbFactory(newProvider func(db *fakeDB) sdk.Provider) Factory {
	db := newFakeDB()
	return func(ctx context.Context) (Subject, error) {
		// One instance runs one call at a time (SPEC section 1).
		h, mu := sdk.Handler(newProvider(db)), new(sync.Mutex)
		s, err := newHandlerSubject(ctx, func(ctx context.Context, export string, input []byte) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			return h(ctx, export, input)
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
	p.db.write(ctx, req.Session, slices.Concat(req.RequestMessages, req.ResponseMessages))
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
	msgs := slices.Concat(req.RequestMessages, req.ResponseMessages)
	p.db.write(ctx, req.Session, msgs)
	p.cache[req.Session] = p.db.read(ctx, req.Session)
	return &abi.StoreResponse{}, nil
}
