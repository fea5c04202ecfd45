package sqlcap

import (
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
	"sync"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// The driver interrupts a statement whose context ends only while its
// QueryContext call runs, i.e. up to the first row. A query that is slow
// between rows (a filtered recursive CTE) would run on, so the capability
// interrupts reading rows itself, with sqlite3_interrupt on the connection's
// handle. The driver does not export the handle; it is read once per
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

// interruptWhenDone interrupts the connection's running statement once ctx
// ends, until the returned stop is called. After stop returns the interrupt
// can no longer happen, so it never reaches a later statement or a closed
// connection.
func interruptWhenDone(ctx context.Context, handle uintptr) (stop func()) {
	var mu sync.Mutex
	finished := false
	cancel := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		// A fresh TLS: the statement's goroutine owns the connection's.
		tls := libc.NewTLS()
		sqlite3.Xsqlite3_interrupt(tls, handle)
		tls.Close()
	})
	return func() {
		if !cancel() {
			mu.Lock()
			finished = true
			mu.Unlock()
		}
	}
}
