package sqlcap

import (
	"testing"

	"github.com/stretchr/testify/require"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wasmhist/wasmhist/host/internal/modpin"
)

// TestPinSQLiteHandleField pins what interrupt.go reaches by reflection:
// modernc's driver connection keeps the connection's sqlite3* in an
// unexported uintptr field named db. The handle found must be the real one,
// which SQLite confirms by naming the file the connection opened.
func TestPinSQLiteHandleField(t *testing.T) {
	const dep = "modernc.org/sqlite"
	version, err := modpin.Version(".", dep)
	require.NoError(t, err)
	path := dbPath(t, "pin.db")
	dc, err := drv.Open("file:" + path)
	require.NoError(t, err)
	defer dc.Close()
	handle, err := sqliteHandle(dc)
	require.NoError(t, err, "%s %s: the driver connection has no uintptr field db; interrupt.go must find the handle another way", dep, version)

	tls := libc.NewTLS()
	defer tls.Close()
	main, err := libc.CString("main")
	require.NoError(t, err)
	defer libc.Xfree(tls, main)
	got := libc.GoString(sqlite3.Xsqlite3_db_filename(tls, handle, main))
	require.Equal(t, path, got, "%s %s: the field db is no longer the connection's sqlite3*", dep, version)
}
