package host

import (
	"context"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/pool"
	"github.com/wasmhist/wasmhist/host/internal/wasmrt"
)

// backend runs exports: a pool of WebAssembly instances, or a native
// handler. Everything else about a call (limits, capabilities, decoding,
// state) is shared, so both kinds behave alike.
type backend interface {
	// acquire returns a runner for one call.
	acquire(ctx context.Context) (runner, error)
	close(ctx context.Context) error
}

type runner interface {
	run(ctx context.Context, export string, input []byte) ([]byte, error)
	// release ends the call; healthy false discards the instance.
	release(ctx context.Context, healthy bool)
}

// wasmBackend pools instances of one compiled module.
type wasmBackend struct {
	module *wasmrt.Module
	pool   *pool.Pool[*wasmrt.Instance]
	limits Limits
}

func newWasmBackend(m *wasmrt.Module, l Limits) *wasmBackend {
	b := &wasmBackend{module: m, limits: l}
	b.pool = pool.New(l.MaxIdleInstances, l.MaxInstances,
		func(ctx context.Context) (*wasmrt.Instance, error) { return m.NewInstance(ctx, l.MemoryPages) },
		func(ctx context.Context, in *wasmrt.Instance) error { return in.Close(ctx) })
	return b
}

func (b *wasmBackend) acquire(ctx context.Context) (runner, error) {
	for {
		in, err := b.pool.Get(ctx)
		if err != nil {
			if err == pool.ErrClosed {
				return nil, ErrClosed
			}
			return nil, err
		}
		if in.Current() {
			return &wasmRunner{b: b, in: in}, nil
		}
		// An idle instance of the interpreter, which the compiler's code
		// has replaced: the next Get makes one on the compiler's.
		b.pool.Drop(ctx, in)
	}
}

func (b *wasmBackend) close(ctx context.Context) error {
	err := b.pool.Close(ctx)
	if rerr := b.module.Release(ctx); err == nil {
		err = rerr
	}
	return err
}

type wasmRunner struct {
	b  *wasmBackend
	in *wasmrt.Instance
}

func (r *wasmRunner) run(ctx context.Context, export string, input []byte) ([]byte, error) {
	return r.in.Call(ctx, export, input)
}

func (r *wasmRunner) release(ctx context.Context, healthy bool) {
	// A grown instance is recycled: Wasm memory never shrinks, so only a
	// fresh instance gives it back.
	if healthy && !r.in.Exited() && r.in.Current() && !r.in.HitMemoryLimit() && r.in.MemoryBytes() <= r.b.limits.RecycleBytes {
		r.b.pool.Put(ctx, r.in)
		return
	}
	r.b.pool.Drop(ctx, r.in)
}

// nativeBackend runs an abi.Handler in process.
type nativeBackend struct {
	h abi.Handler
}

func (b nativeBackend) acquire(context.Context) (runner, error) { return b, nil }
func (nativeBackend) close(context.Context) error               { return nil }
func (nativeBackend) release(context.Context, bool)             {}

func (b nativeBackend) run(ctx context.Context, export string, input []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: panic: %v", ErrTrap, r)
		}
	}()
	out, err = b.h(ctx, export, input)
	if err != nil {
		switch ctx.Err() {
		case context.DeadlineExceeded:
			return nil, ErrTimeout
		case context.Canceled:
			return nil, context.Canceled
		}
		// Whatever the handler returned crosses as the wire error would.
		return nil, abi.AsError(err)
	}
	return out, nil
}
