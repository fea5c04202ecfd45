package capability

import (
	"context"
	"sync"
	"time"
)

// An export call's deadline counts the plugin's time, not the host's: while
// a capability waits on the call's behalf for something the plugin does not
// control (the write lock of a database another process holds), the call's
// clock stands still, so the wait neither times the call out nor shortens
// what the plugin has left afterwards. The wait itself is bounded by the
// capability (e.g. sqlcap's BusyTimeout).

// WithClock returns a context that ends d after now, plus the time spent
// in Pause, or when parent ends. Its Err is context.DeadlineExceeded at the
// deadline, as with context.WithTimeout; its Deadline is parent's, since
// its own moves.
func WithClock(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c := &clock{Context: parent, done: make(chan struct{}), end: time.Now().Add(d)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = time.AfterFunc(d, c.expire)
	c.stopParent = context.AfterFunc(parent, func() { c.cancel(parent.Err()) })
	return c, func() { c.cancel(context.Canceled) }
}

// Pause stops the clock of ctx (if it has one, and it has not run out)
// until resume is called. Pauses nest.
func Pause(ctx context.Context) (resume func()) {
	c, _ := ctx.Value(clockKey{}).(*clock)
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return func() {}
	}
	if c.paused == 0 {
		c.timer.Stop()
		c.left = time.Until(c.end)
	}
	c.paused++
	var once sync.Once
	return func() { once.Do(c.resume) }
}

type clockKey struct{}

type clock struct {
	context.Context // the parent, for Deadline and Value
	done            chan struct{}
	stopParent      func() bool

	mu     sync.Mutex
	err    error
	end    time.Time     // the deadline, while running
	left   time.Duration // what remains, while paused
	paused int
	timer  *time.Timer
	after  map[*func()]struct{} // functions registered by AfterFunc
}

func (c *clock) Done() <-chan struct{} { return c.done }

// Err is the clock's error; a running clock past its end has run out even
// before its timer fires (a call with a deadline of 1 ns must not start).
func (c *clock) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.paused == 0 && !time.Now().Before(c.end) {
		c.closeLocked(context.DeadlineExceeded)
	}
	return c.err
}

func (c *clock) Value(key any) any {
	if key == (clockKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// AfterFunc lets context.AfterFunc and the contexts derived from the clock
// follow it without a goroutine each.
func (c *clock) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.after == nil {
		c.after = map[*func()]struct{}{}
	}
	key := &f
	c.after[key] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.after[key]
		delete(c.after, key)
		return ok
	}
}

func (c *clock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused--
	if c.paused > 0 || c.err != nil {
		return
	}
	c.end = time.Now().Add(c.left)
	c.timer = time.AfterFunc(c.left, c.expire)
}

func (c *clock) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A timer stopped too late by Pause waits for resume, which sets a
	// new one; one that outlived a pause finds the deadline moved.
	if c.paused > 0 || c.err != nil {
		return
	}
	if d := time.Until(c.end); d > 0 {
		c.timer = time.AfterFunc(d, c.expire)
		return
	}
	c.closeLocked(context.DeadlineExceeded)
}

func (c *clock) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.closeLocked(err)
	}
}

func (c *clock) closeLocked(err error) {
	c.err = err
	close(c.done)
	c.timer.Stop()
	c.stopParent()
	for f := range c.after {
		go (*f)()
	}
	c.after = nil
}
