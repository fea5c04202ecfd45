// Package capability is the seam between the plugin runtime and the host
// capabilities (such as sql) that plugins reach through host functions.
//
// Every capability host function has the WebAssembly signature
// (i64 request) -> i64 response in module abi.CapabilityModule: both are
// Extism kernel memory offsets of JSON documents. The runtime reads the
// request, calls Func.Call with the per-call Call found in the context, and
// writes {"result": ...} or {"error": {"code": ..., "message": ...}}.
//
// Host functions are bound once per compiled module, but grants are per
// loaded plugin, so a function finds what the calling plugin was granted
// through the Call in its context, never through a closure.
//
// A capability is a Kind, registered from the init function of the package
// that implements it, as a database/sql driver is: a program links only the
// capabilities it imports. A Kind is code only; whatever it opens (files,
// connections) lives in a Backend that belongs to one Host, which creates it
// on first use and closes it with itself.
package capability

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// Func is one capability host function.
type Func struct {
	// Capability is what a plugin must be granted to use the function.
	Capability abi.Capability
	// Name is the import name inside abi.CapabilityModule.
	Name string
	// Call serves one request. It returns the result JSON, valid and
	// compact (the plugin gets it as is), or an error (an *abi.Error
	// keeps its code; anything else is internal).
	Call func(ctx context.Context, call *Call, request []byte) (json []byte, err error)
}

// Kind is one capability: its host function and how a Host opens the
// resources it serves from.
type Kind struct {
	Func Func
	// Engine tells apart kinds that serve one capability on different
	// engines (sql on SQLite and on PostgreSQL): each has a Backend of its
	// own, and a grant names its engine through Engined. The kinds of one
	// capability share one host function, so their Func.Call must not
	// depend on the engine: RequestFunc is such a Call. Empty for a
	// capability served by one kind.
	Engine string
	// NewBackend returns the resources of one Host, on the first call of
	// that Host that uses the capability. The Host closes it.
	NewBackend func() (Backend, error)
}

// Backend is what one Host holds open for a capability, e.g. database
// handles.
type Backend interface {
	Close() error
}

var (
	kindsMu sync.Mutex
	kinds   []Kind
)

// Register adds a capability kind. A Host binds the kinds registered when
// it is created, so Register belongs in an init function. Several kinds may
// serve one capability if their engines differ and they share its host
// function's name.
func Register(k Kind) error {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	for _, g := range kinds {
		sameCap := g.Func.Capability == k.Func.Capability
		if sameCap && g.Engine == k.Engine {
			return fmt.Errorf("capability: %q (engine %q) registered twice", k.Func.Capability, k.Engine)
		}
		if sameCap != (g.Func.Name == k.Func.Name) {
			return fmt.Errorf("capability: %q and %q both use host function %q", g.Func.Capability, k.Func.Capability, k.Func.Name)
		}
	}
	kinds = append(kinds, k)
	return nil
}

// Kinds lists the registered kinds.
func Kinds() []Kind {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	return append([]Kind(nil), kinds...)
}

// ErrClosed is returned for a capability used after its Host closed.
var ErrClosed = errors.New("capability: closed")

// kindKey names one kind: its capability and engine.
type kindKey struct {
	c      abi.Capability
	engine string
}

// Backends are the backends of one Host, opened on first use.
type Backends struct {
	kinds map[kindKey]Kind
	funcs []Func // one per capability, in registration order

	mu     sync.Mutex
	open   map[kindKey]Backend
	closed bool
}

// NewBackends returns the (not yet opened) backends of kinds.
func NewBackends(ks []Kind) *Backends {
	b := &Backends{kinds: make(map[kindKey]Kind, len(ks)), open: map[kindKey]Backend{}}
	seen := map[abi.Capability]bool{}
	for _, k := range ks {
		b.kinds[kindKey{k.Func.Capability, k.Engine}] = k
		if !seen[k.Func.Capability] {
			seen[k.Func.Capability] = true
			b.funcs = append(b.funcs, k.Func)
		}
	}
	return b
}

// Funcs lists the host functions of the kinds, one per capability.
func (b *Backends) Funcs() []Func { return append([]Func(nil), b.funcs...) }

// Get returns the backend of a capability's kind without an engine,
// opening it on first use.
func (b *Backends) Get(c abi.Capability) (Backend, error) { return b.GetEngine(c, "") }

// GetEngine returns the backend of the kind of capability c on engine,
// opening it on first use.
func (b *Backends) GetEngine(c abi.Capability, engine string) (Backend, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	key := kindKey{c, engine}
	if be, ok := b.open[key]; ok {
		return be, nil
	}
	k, ok := b.kinds[key]
	if !ok || k.NewBackend == nil {
		if engine != "" {
			return nil, abi.Errorf(abi.CodePermissionDenied, "capability %q on %s is not provided by this host", c, engine)
		}
		return nil, abi.Errorf(abi.CodePermissionDenied, "capability %q is not provided by this host", c)
	}
	be, err := k.NewBackend()
	if err != nil {
		return nil, fmt.Errorf("capability %s: %w", c, err)
	}
	b.open[key] = be
	return be, nil
}

// backendOf returns the backend serving grant g.
func (b *Backends) backendOf(g Grant) (Backend, error) {
	engine := ""
	if e, ok := g.(Engined); ok {
		engine = e.Engine()
	}
	return b.GetEngine(g.Capability(), engine)
}

// Close closes every opened backend; Get fails afterwards.
func (b *Backends) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	var errs []error
	for _, be := range b.open {
		errs = append(errs, be.Close())
	}
	b.open = nil
	return errors.Join(errs...)
}

// Grant is a capability granted to one loaded plugin, with its settings
// (for sql: which database). Begin starts its part of one export call.
type Grant interface {
	Capability() abi.Capability
	// Begin is called lazily, on the first use within an export call, with
	// the calling Host's backend of the capability. The returned Session
	// ends with the call.
	Begin(ctx context.Context, backend Backend) (Session, error)
}

// Engined is a Grant served by a kind with an Engine (see Kind.Engine).
type Engined interface {
	Grant
	Engine() string
}

// Requester is a Session that serves its capability's requests itself, so
// that the kinds of one capability on different engines can share its host
// function (see RequestFunc).
type Requester interface {
	Session
	Request(ctx context.Context, request []byte) ([]byte, error)
}

// RequestFunc returns a Func whose calls go to the Requester session the
// calling plugin's grant of capability c begins.
func RequestFunc(c abi.Capability, name string) Func {
	return Func{Capability: c, Name: name, Call: func(ctx context.Context, call *Call, request []byte) ([]byte, error) {
		if call == nil {
			return nil, abi.Errorf(abi.CodeInternal, "%s called outside an export call", name)
		}
		s, err := call.Session(ctx, c)
		if err != nil {
			var hf *HostFault
			if errors.As(err, &hf) {
				call.setFault(hf.Cause)
			}
			return nil, err
		}
		r, ok := s.(Requester)
		if !ok {
			return nil, abi.Errorf(abi.CodeInternal, "%s: session of unexpected type %T", c, s)
		}
		out, err := r.Request(ctx, request)
		var hf *HostFault
		if errors.As(err, &hf) {
			call.setFault(hf.Cause)
		}
		return out, err
	}}
}

// HostFault is a request's error whose cause is the host's, not the
// plugin's: a database another writer kept locked past the host's wait,
// a host key rotated since the host read it.
// The plugin reads Plugin; the call fails with Cause whatever the plugin
// makes of it (see Call.Fault), so that the caller is told the cause and
// its remedy rather than the plugin's report of it.
type HostFault struct {
	Plugin *abi.Error
	Cause  error
}

func (f *HostFault) Error() string { return f.Plugin.Error() }

// Unwrap gives the plugin's error, for abi.AsError.
func (f *HostFault) Unwrap() error { return f.Plugin }

// Seal makes the public host.Grant of a grant. Package host sets it from
// its init function; a capability package, which imports host, calls it in
// its constructor. It is a hook because host.Grant is sealed by an
// unexported method, which only package host can implement.
var Seal func(Grant) any

// Session is a grant's per-call state, e.g. an open transaction.
type Session interface {
	// End finishes the call: commit when ok, roll back otherwise.
	End(ctx context.Context, ok bool) error
}

// Joiner is a Grant whose sessions can stay open across the calls of a
// txn.Txn, so that their work commits once, with the Txn.
type Joiner interface {
	Grant
	// Target names the database Begin would open for ctx (for example
	// "sqlite:/abs/path"): the calls of one Txn share one session per
	// target.
	Target(ctx context.Context) (string, error)
}

// Joinable is a Session of a Joiner.
type Joinable interface {
	Session
	txn.Participant
	// StartCall starts one call's part of the session: from here to
	// EndCall, the call's work can be undone alone (a savepoint). Calls of
	// one session take turns: StartCall waits for the previous EndCall.
	StartCall(ctx context.Context) error
	// EndCall ends the call's part, keeping its work when ok and undoing it
	// otherwise. It reports whether the session holds uncommitted writes;
	// a session that does not has ended itself (as End would) and must
	// not be used again.
	EndCall(ctx context.Context, ok bool) (pending bool, err error)
}

// Acceptor is a Joinable that serves only some grants of its target (for
// PostgreSQL: the grants that log in as its role). A call whose grant's
// target is already held by an Acceptor is refused with Accept's error.
type Acceptor interface {
	Accept(ctx context.Context, g Grant) error
}

// Call is one export call of one plugin instance.
type Call struct {
	Plugin   string
	grants   map[abi.Capability]Grant
	backends *Backends
	mu       sync.Mutex
	sessions map[abi.Capability]Session
	order    []abi.Capability
	// joined are the sessions kept for a Txn, by capability, with their
	// targets.
	txn    *txn.Txn
	joined map[abi.Capability]joined
	fault  error // the first HostFault's cause
}

func (c *Call) setFault(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fault == nil {
		c.fault = err
	}
}

// Fault is the cause of the first request of the call that failed through
// no fault of the plugin's (a HostFault), or nil. A call that failed after
// one failed because of it.
func (c *Call) Fault() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fault
}

type joined struct {
	target string
	s      Joinable
	member bool // already a participant of the Txn
}

// NewCall starts a call for a plugin with its grants, served from the
// backends of its Host. Work of grants that are Joiners joins the Txn of
// ctx, if it carries one (see package txn).
func NewCall(ctx context.Context, plugin string, grants []Grant, backends *Backends) *Call {
	c := &Call{Plugin: plugin, grants: make(map[abi.Capability]Grant, len(grants)), backends: backends, txn: txn.From(ctx)}
	for _, g := range grants {
		c.grants[g.Capability()] = g
	}
	return c
}

// Session returns the call's session of a capability, beginning it on first
// use. An ungranted capability is abi.ErrPermissionDenied.
func (c *Call) Session(ctx context.Context, capName abi.Capability) (Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sessions[capName]; ok {
		return s, nil
	}
	if j, ok := c.joined[capName]; ok {
		return j.s, nil
	}
	g, ok := c.grants[capName]
	if !ok {
		return nil, abi.Errorf(abi.CodePermissionDenied, "plugin %q was not granted capability %q", c.Plugin, capName)
	}
	if jg, ok := g.(Joiner); ok && c.txn != nil {
		return c.join(ctx, capName, jg)
	}
	be, err := c.backends.backendOf(g)
	if err != nil {
		return nil, err
	}
	s, err := g.Begin(ctx, be)
	if err != nil {
		return nil, err
	}
	if c.sessions == nil {
		c.sessions = make(map[abi.Capability]Session)
	}
	c.sessions[capName] = s
	c.order = append(c.order, capName)
	return s, nil
}

// join returns the Txn's session of the grant's target, beginning one if
// the Txn has none.
func (c *Call) join(ctx context.Context, capName abi.Capability, g Joiner) (Session, error) {
	target, err := g.Target(ctx)
	if err != nil {
		return nil, err
	}
	j := joined{target: target}
	if p := c.txn.Participant(target); p != nil {
		js, ok := p.(Joinable)
		if !ok {
			return nil, fmt.Errorf("capability: %s is held by a participant of type %T", target, p)
		}
		if a, ok := p.(Acceptor); ok {
			if err := a.Accept(ctx, g); err != nil {
				return nil, err
			}
		}
		j.s, j.member = js, true
	} else {
		be, err := c.backends.backendOf(g)
		if err != nil {
			return nil, err
		}
		s, err := g.Begin(ctx, be)
		if err != nil {
			return nil, err
		}
		js, ok := s.(Joinable)
		if !ok {
			s.End(ctx, false)
			return nil, fmt.Errorf("capability: %s: session of type %T cannot join a transaction", capName, s)
		}
		j.s = js
	}
	if err := j.s.StartCall(ctx); err != nil {
		if !j.member {
			j.s.End(ctx, false)
		}
		return nil, err
	}
	if c.joined == nil {
		c.joined = make(map[abi.Capability]joined)
	}
	c.joined[capName] = j
	return j.s, nil
}

// End ends every session the call began, in reverse order. Sessions of a
// Txn end only the call's part; one left with uncommitted writes joins the
// Txn, which commits it later.
func (c *Call) End(ctx context.Context, ok bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.order) - 1; i >= 0; i-- {
		errs = append(errs, c.sessions[c.order[i]].End(ctx, ok))
	}
	for _, j := range c.joined {
		pending, err := j.s.EndCall(ctx, ok)
		if err != nil {
			errs = append(errs, err)
			if j.member {
				// The Txn's transaction may be gone with the call's part.
				c.txn.Fail(fmt.Errorf("%s: %w", j.target, err))
			}
		}
		if pending && !j.member {
			if err := c.txn.Join(j.target, j.s); err != nil {
				errs = append(errs, err, j.s.End(ctx, false))
			}
		}
	}
	c.sessions, c.order, c.joined = nil, nil, nil
	return errors.Join(errs...)
}

type ctxKey struct{}

// WithCall returns a context carrying the call (see WithValue).
func WithCall(ctx context.Context, c *Call) context.Context {
	return WithValue(ctx, ctxKey{}, c)
}

// WithValue is context.WithValue (key comparable, as there), except that
// when ctx follows AfterFunc itself, as a call's clock does (WithClock),
// so does the result: context.AfterFunc and the contexts derived from it
// (a guest call's interrupt, a statement's deadline) then register with
// the clock, where through context.WithValue each would start a goroutine
// to wait on the clock, and wake it when done: three or more a turn.
func WithValue(ctx context.Context, key, val any) context.Context {
	v := valueCtx{Context: ctx, key: key, val: val}
	if af, ok := ctx.(afterFuncer); ok {
		return &followingValueCtx{valueCtx: v, parent: af}
	}
	return &v
}

// afterFuncer is the method package context looks for on a parent it
// cannot follow otherwise.
type afterFuncer interface {
	AfterFunc(func()) (stop func() bool)
}

type valueCtx struct {
	context.Context
	key, val any
}

func (c *valueCtx) Value(key any) any {
	if key == c.key {
		return c.val
	}
	return c.Context.Value(key)
}

// followingValueCtx is a valueCtx whose parent has AfterFunc, kept
// visible.
type followingValueCtx struct {
	valueCtx
	parent afterFuncer
}

func (c *followingValueCtx) AfterFunc(f func()) (stop func() bool) { return c.parent.AfterFunc(f) }

// FromContext returns the call in ctx, or nil.
func FromContext(ctx context.Context) *Call {
	c, _ := ctx.Value(ctxKey{}).(*Call)
	return c
}
