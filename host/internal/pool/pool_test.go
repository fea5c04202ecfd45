package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type inst struct {
	id    int64
	inUse atomic.Bool
	freed atomic.Bool
}

type counter struct {
	made, freed atomic.Int64
	live        atomic.Int64
	maxLive     atomic.Int64
}

func (c *counter) create(context.Context) (*inst, error) {
	n := c.live.Add(1)
	for {
		m := c.maxLive.Load()
		if n <= m || c.maxLive.CompareAndSwap(m, n) {
			break
		}
	}
	return &inst{id: c.made.Add(1)}, nil
}

func (c *counter) destroy(_ context.Context, v *inst) error {
	if v.freed.Swap(true) {
		panic("freed twice")
	}
	c.live.Add(-1)
	c.freed.Add(1)
	return nil
}

// TestHammer drives the pool from many goroutines: no instance is ever used
// by two at once, the live bound holds, and every instance made is freed.
func TestHammer(t *testing.T) {
	const workers, rounds, maxLive = 16, 300, 4
	var c counter
	p := New(2, maxLive, c.create, c.destroy)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				v, err := p.Get(ctx)
				if !assert.NoError(t, err) {
					return
				}
				assert.False(t, v.inUse.Swap(true), "instance handed out twice")
				v.inUse.Store(false)
				if (w+r)%7 == 0 {
					p.Drop(ctx, v)
				} else {
					p.Put(ctx, v)
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, c.maxLive.Load(), int64(maxLive), "live instances")
	assert.LessOrEqual(t, p.Idle(), 2, "idle instances")
	require.NoError(t, p.Close(ctx))
	assert.Equal(t, c.made.Load(), c.freed.Load(), "made and freed")
	_, err := p.Get(ctx)
	assert.ErrorIs(t, err, ErrClosed, "Get after Close")
}

func TestReuseAndSeed(t *testing.T) {
	var c counter
	p := New(1, 2, c.create, c.destroy)
	ctx := context.Background()
	seed, _ := c.create(ctx)
	p.Seed(ctx, seed)
	v, err := p.Get(ctx)
	require.NoError(t, err)
	require.Same(t, seed, v, "Get did not return the seeded instance")
	p.Put(ctx, v)
	again, _ := p.Get(ctx)
	require.Same(t, seed, again, "healthy instance not reused")
	p.Drop(ctx, seed)
	fresh, _ := p.Get(ctx)
	require.NotSame(t, seed, fresh, "dropped instance reused")
}

func TestGetWaitsForSlot(t *testing.T) {
	var c counter
	p := New(1, 1, c.create, c.destroy)
	ctx := context.Background()
	v, _ := p.Get(ctx)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := p.Get(cctx)
	require.ErrorIs(t, err, context.Canceled, "Get with the only slot taken")
	got := make(chan *inst)
	go func() { w, _ := p.Get(ctx); got <- w }()
	p.Put(ctx, v)
	require.Same(t, v, <-got, "waiter did not get the returned instance")
}

func TestCloseFreesReturned(t *testing.T) {
	var c counter
	p := New(4, 4, c.create, c.destroy)
	ctx := context.Background()
	v, _ := p.Get(ctx)
	p.Close(ctx)
	p.Put(ctx, v)
	require.True(t, v.freed.Load(), "instance returned after Close was kept")
}
