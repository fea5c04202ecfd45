package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
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
				if err != nil {
					t.Error(err)
					return
				}
				if v.inUse.Swap(true) {
					t.Error("instance handed out twice")
				}
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
	if got := c.maxLive.Load(); got > maxLive {
		t.Errorf("%d live instances, bound %d", got, maxLive)
	}
	if p.Idle() > 2 {
		t.Errorf("%d idle, bound 2", p.Idle())
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c.made.Load() != c.freed.Load() {
		t.Errorf("made %d, freed %d", c.made.Load(), c.freed.Load())
	}
	if _, err := p.Get(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
}

func TestReuseAndSeed(t *testing.T) {
	var c counter
	p := New(1, 2, c.create, c.destroy)
	ctx := context.Background()
	seed, _ := c.create(ctx)
	p.Seed(ctx, seed)
	v, err := p.Get(ctx)
	if err != nil || v != seed {
		t.Fatalf("Get did not return the seeded instance: %v %v", v, err)
	}
	p.Put(ctx, v)
	if again, _ := p.Get(ctx); again != seed {
		t.Fatal("healthy instance not reused")
	}
	p.Drop(ctx, seed)
	if fresh, _ := p.Get(ctx); fresh == seed {
		t.Fatal("dropped instance reused")
	}
}

func TestGetWaitsForSlot(t *testing.T) {
	var c counter
	p := New(1, 1, c.create, c.destroy)
	ctx := context.Background()
	v, _ := p.Get(ctx)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Get(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with the only slot taken: %v", err)
	}
	got := make(chan *inst)
	go func() { w, _ := p.Get(ctx); got <- w }()
	p.Put(ctx, v)
	if w := <-got; w != v {
		t.Fatal("waiter did not get the returned instance")
	}
}

func TestCloseFreesReturned(t *testing.T) {
	var c counter
	p := New(4, 4, c.create, c.destroy)
	ctx := context.Background()
	v, _ := p.Get(ctx)
	p.Close(ctx)
	p.Put(ctx, v)
	if !v.freed.Load() {
		t.Fatal("instance returned after Close was kept")
	}
}
