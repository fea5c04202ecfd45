package sqlcap

import (
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// The driver does not export the connection's sqlite3*; it is read once per
// connection, and Connect fails if a driver upgrade renamed it.
func sqliteHandle(dc driver.Conn) (uintptr, error) {
	v := reflect.ValueOf(dc)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		if f := v.Elem().FieldByName("db"); f.IsValid() && f.Kind() == reflect.Uintptr && f.Uint() != 0 {
			return uintptr(f.Uint()), nil
		}
	}
	return 0, errors.New("sqlcap: cannot find the SQLite handle of the driver connection")
}

// A plugin's request runs its statements with a context that never ends
// (detached) and interrupts them itself: for a context that can end, the
// driver starts a goroutine per statement to watch it, which cost 8% of the
// CPU of a turn (RATIONALE: "Why does the sql capability interrupt plugin
// statements itself?"). One watcher per request (context.AfterFunc on the
// request's deadline) raises the connection's stop flag and calls
// sqlite3_interrupt. SQLite forgets an interrupt that arrives while no
// statement runs, so the flag is what counts: it is checked before each
// statement and each row, by a progress handler every progressOps virtual
// machine instructions (a statement that started just after the interrupt),
// and by a busy handler that stops waiting for a lock.
const progressOps = 1000

// interrupter is the stop state of one connection, found by the SQLite
// callbacks through interrupters by the connection's handle.
type interrupter struct {
	handle  uintptr
	stopped atomic.Bool
	// busyTimeout bounds a wait for a lock (Options.BusyTimeout).
	busyTimeout time.Duration

	mu     sync.Mutex
	active bool          // a request's watcher may interrupt
	req    uint64        // the request being watched: a watcher of an earlier one never interrupts it
	done   chan struct{} // closed once interrupted; the busy handler's wake-up
}

// interrupters maps a connection handle to its interrupter. A connection
// stores its entry when it opens and removes it when it closes.
var interrupters sync.Map // uintptr -> *interrupter

func newInterrupter(handle uintptr, busyTimeout time.Duration) *interrupter {
	it := &interrupter{handle: handle, busyTimeout: busyTimeout}
	interrupters.Store(handle, it)
	return it
}

func (it *interrupter) close() { interrupters.CompareAndDelete(it.handle, it) }

// watch arms the interrupter for one request, whose statements run on the
// goroutine that holds the connection (tls is its C thread state): from
// now until the returned stop, ctx ending stops them. watch installs the
// progress and busy handlers, which the driver's own statements (those of
// a context that can end) replace; stop puts SQLite's own busy handler
// back, which the driver replaces again when it needs to.
func (it *interrupter) watch(ctx context.Context, tls *libc.TLS) (stop func()) {
	it.stopped.Store(false)
	it.mu.Lock()
	it.req++
	req := it.req
	it.active = true
	it.done = make(chan struct{})
	it.mu.Unlock()
	sqlite3.Xsqlite3_progress_handler(tls, it.handle, progressOps, progressFn, it.handle)
	sqlite3.Xsqlite3_busy_handler(tls, it.handle, busyFn, it.handle)
	if ctx.Err() != nil {
		// A request that starts past its deadline is refused at once,
		// not once the watcher's goroutine runs.
		it.interrupt(req)
	}
	// The watcher's goroutine may run after stop, even after the next
	// request was armed (cancel does not wait for a goroutine that has
	// started): it names its request, so it never stops a later one.
	cancel := context.AfterFunc(ctx, func() { it.interrupt(req) })
	return func() {
		cancel()
		// An interrupt that is running holds mu: wait for it, so that it
		// never reaches a later statement or a closed connection.
		it.mu.Lock()
		it.active = false
		it.mu.Unlock()
		sqlite3.Xsqlite3_progress_handler(tls, it.handle, 0, 0, 0)
		sqlite3.Xsqlite3_busy_timeout(tls, it.handle, int32(it.busyTimeout.Milliseconds()))
	}
}

// interrupt stops request req's statements: the one running now, through
// SQLite, and any that would start, through the flag. It does nothing once
// req is over.
func (it *interrupter) interrupt(req uint64) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.active || it.req != req || it.stopped.Load() {
		return
	}
	it.stopped.Store(true)
	// A fresh TLS: the statement's goroutine owns the connection's.
	tls := libc.NewTLS()
	sqlite3.Xsqlite3_interrupt(tls, it.handle)
	tls.Close()
	close(it.done)
}

// errInterrupted is a statement of a request whose deadline had passed
// before it started; mapError reports it as SQLite's interrupt.
var errInterrupted = errors.New("sqlcap: interrupted")

// check refuses to start a statement or read a row once the request was
// interrupted.
func (it *interrupter) check() error {
	if it.stopped.Load() {
		return errInterrupted
	}
	return nil
}

// cFunc is the C function pointer of f, as the transpiled SQLite calls it
// (https://golang.org/s/go11func: a func value is a pointer to its code).
func cFunc[T any](f T) uintptr { return *(*uintptr)(unsafe.Pointer(&struct{ f T }{f})) }

var (
	progressFn = cFunc(progress)
	busyFn     = cFunc(busy)
)

// progress is SQLite's progress handler: non-zero interrupts the statement.
func progress(_ *libc.TLS, handle uintptr) int32 {
	if v, ok := interrupters.Load(handle); ok && v.(*interrupter).stopped.Load() {
		return 1
	}
	return 0
}

// The retry schedule of SQLite's own busy callback (sqliteDefaultBusyCallback):
// the delay before the n-th retry and the total waited before it, in ms.
var (
	busyDelays = [...]int32{1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100}
	busyTotals = [...]int32{0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228}
)

// busy is SQLite's default busy handler, up to Options.BusyTimeout, that
// gives up once the request is interrupted. It runs on the statement's
// goroutine.
func busy(_ *libc.TLS, handle uintptr, count int32) int32 {
	v, ok := interrupters.Load(handle)
	if !ok {
		return 0
	}
	it := v.(*interrupter)
	tmout := int32(it.busyTimeout.Milliseconds())
	n := int32(len(busyDelays))
	var delay, prior int32
	if count < n {
		delay, prior = busyDelays[count], busyTotals[count]
	} else {
		delay = busyDelays[n-1]
		prior = busyTotals[n-1] + delay*(count-(n-1))
	}
	if prior+delay > tmout {
		if delay = tmout - prior; delay <= 0 {
			return 0
		}
	}
	it.mu.Lock()
	done := it.done
	it.mu.Unlock()
	t := time.NewTimer(time.Duration(delay) * time.Millisecond)
	defer t.Stop()
	select {
	case <-done:
		return 0
	case <-t.C:
		return 1
	}
}
