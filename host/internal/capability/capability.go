// Package capability is the seam between the plugin runtime and the host
// capabilities (such as sql) that plugins reach through host functions.
//
// Every capability host function has the WebAssembly signature
// (i64 request) -> i64 response in module abi.CapabilityModule: both are
// Extism kernel memory offsets of JSON documents. The runtime reads the
// request, calls Func.Call with the per-call Call found in the context, and
// writes {"result": ...} or {"error": {"code": ..., "message": ...}}.
//
// Host functions are registered once per compiled module, but grants are
// per loaded plugin, so a function finds what the calling plugin was granted
// through the Call in its context, never through a closure.
package capability

import (
	"context"
	"errors"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
)

// Func is one capability host function.
type Func struct {
	// Capability is what a plugin must be granted to use the function.
	Capability abi.Capability
	// Name is the import name inside abi.CapabilityModule.
	Name string
	// Call serves one request. It returns the result JSON, or an error
	// (an *abi.Error keeps its code; anything else is internal).
	Call func(ctx context.Context, call *Call, request []byte) (json []byte, err error)
}

// Grant is a capability granted to one loaded plugin, with its settings
// (for sql: which database). Begin starts its part of one export call.
type Grant interface {
	Capability() abi.Capability
	// Begin is called lazily, on the first use within an export call. The
	// returned Session ends with the call.
	Begin(ctx context.Context) (Session, error)
}

// Session is a grant's per-call state, e.g. an open transaction.
type Session interface {
	// End finishes the call: commit when ok, roll back otherwise.
	End(ctx context.Context, ok bool) error
}

// Call is one export call of one plugin instance.
type Call struct {
	Plugin string
	grants map[abi.Capability]Grant

	mu       sync.Mutex
	sessions map[abi.Capability]Session
	order    []abi.Capability
}

// NewCall starts a call for a plugin with its grants.
func NewCall(plugin string, grants []Grant) *Call {
	c := &Call{Plugin: plugin, grants: make(map[abi.Capability]Grant, len(grants))}
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
	g, ok := c.grants[capName]
	if !ok {
		return nil, abi.Errorf(abi.CodePermissionDenied, "plugin %q was not granted capability %q", c.Plugin, capName)
	}
	s, err := g.Begin(ctx)
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

// End ends every session the call began, in reverse order.
func (c *Call) End(ctx context.Context, ok bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for i := len(c.order) - 1; i >= 0; i-- {
		errs = append(errs, c.sessions[c.order[i]].End(ctx, ok))
	}
	c.sessions, c.order = nil, nil
	return errors.Join(errs...)
}

type ctxKey struct{}

// WithCall returns a context carrying the call.
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the call in ctx, or nil.
func FromContext(ctx context.Context) *Call {
	c, _ := ctx.Value(ctxKey{}).(*Call)
	return c
}
