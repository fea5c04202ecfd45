// Package pool keeps instances of one loaded plugin for reuse. An instance
// serves one goroutine at a time: Get hands it out exclusively, and the
// caller gives it back with Put when it is healthy or Drop when it is not.
package pool

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned by Get after Close.
var ErrClosed = errors.New("pool: closed")

// Pool is a bounded pool of T. The zero value is not usable; use New.
type Pool[T any] struct {
	create  func(context.Context) (T, error)
	destroy func(context.Context, T) error
	maxIdle int
	// slots bounds live instances (idle and in use); a Get takes a token,
	// Put and Drop give it back.
	slots chan struct{}

	mu     sync.Mutex
	idle   []T
	closed bool
}

// New returns a pool that makes instances with create, frees them with
// destroy, keeps at most maxIdle idle instances and at most maxLive live
// ones (in use and idle); Get waits for a free slot.
func New[T any](maxIdle, maxLive int, create func(context.Context) (T, error), destroy func(context.Context, T) error) *Pool[T] {
	maxLive = max(maxLive, 1)
	return &Pool[T]{create: create, destroy: destroy, maxIdle: min(max(maxIdle, 0), maxLive), slots: make(chan struct{}, maxLive)}
}

// Get returns an idle instance, or a new one.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	var zero T
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return zero, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		v := p.idle[n-1]
		p.idle[n-1] = zero
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return v, nil
	}
	p.mu.Unlock()
	v, err := p.create(ctx)
	if err != nil {
		<-p.slots
		return zero, err
	}
	return v, nil
}

// Put returns a healthy instance for reuse.
func (p *Pool[T]) Put(ctx context.Context, v T) {
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.maxIdle {
		p.idle = append(p.idle, v)
		p.mu.Unlock()
		<-p.slots
		return
	}
	p.mu.Unlock()
	p.destroy(ctx, v)
	<-p.slots
}

// Drop frees an instance that must not be reused.
func (p *Pool[T]) Drop(ctx context.Context, v T) {
	p.destroy(ctx, v)
	<-p.slots
}

// Seed adds an instance made outside Get (the one made at load) as idle.
func (p *Pool[T]) Seed(ctx context.Context, v T) {
	p.slots <- struct{}{}
	p.Put(ctx, v)
}

// Idle is the number of idle instances.
func (p *Pool[T]) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Close frees the idle instances; instances in use are freed when they come
// back. Get fails afterwards.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	var errs []error
	for _, v := range idle {
		errs = append(errs, p.destroy(ctx, v))
	}
	return errors.Join(errs...)
}
