package sqlwire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decodeSQL(t *testing.T, req []byte) string {
	t.Helper()
	sts, _, ok := decodeRequestFast(req, true)
	require.True(t, ok, "%s", req)
	require.Len(t, sts, 1)
	return sts[0].SQL
}

// TestSQLTextsRemembered: a statement's SQL decodes to the text
// encoding/json makes of it, the second time from memory (the same string),
// and that memory shares nothing with the requests it came from: a request
// buffer the plugin reuses for its next request changes no text.
func TestSQLTextsRemembered(t *testing.T) {
	for _, tc := range []struct{ name, sqlJSON string }{
		{"escaped newlines", `"SELECT a,\n  b FROM t\n\tWHERE c = ?1"`},
		{"plain", `"SELECT 1"`},
		{"unicode escapes", `"SELECT '\u00e9\ud83d\ude00' AS x"`},
		{"invalid escape kept as encoding/json does", `"SELECT '\ud800'"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want string
			require.NoError(t, json.Unmarshal([]byte(tc.sqlJSON), &want))
			req := []byte(`{"statements":[{"sql":` + tc.sqlJSON + `}]}`)
			first := decodeSQL(t, req)
			assert.Equal(t, want, first)
			// The plugin writes its next request where this one was.
			for i := range req {
				req[i] = 'x'
			}
			second := decodeSQL(t, []byte(`{"statements":[{"sql":`+tc.sqlJSON+`}]}`))
			assert.Equal(t, want, second)
			assert.Equal(t, want, first, "a decoded text changed with the request's buffer")
			assert.Equal(t, textAt(first), textAt(second), "the second decode was not remembered")
		})
	}
}

// TestSQLTextsBounded: ever new statements never hold more than the
// bound, and a text too large to remember is decoded every time.
func TestSQLTextsBounded(t *testing.T) {
	for i := range 3 * maxSQLTexts {
		sql := fmt.Sprintf("SELECT %d, '%s'", i, strings.Repeat("y", i))
		got := decodeSQL(t, []byte(`{"statements":[{"sql":"`+sql+`"}]}`))
		require.Equal(t, sql, got)
		sqlTexts.mu.Lock()
		n, size := len(sqlTexts.m), sqlTexts.bytes
		sqlTexts.mu.Unlock()
		require.LessOrEqual(t, n, maxSQLTexts)
		require.LessOrEqual(t, size, maxSQLTextBytes)
	}
	big := `SELECT '` + strings.Repeat("z", maxSQLTextBytes/16) + `'`
	req := `{"statements":[{"sql":"` + big + `"}]}`
	a, b := decodeSQL(t, []byte(req)), decodeSQL(t, []byte(req))
	require.Equal(t, big, a)
	assert.NotEqual(t, textAt(a), textAt(b), "a text past the size bound was remembered")
}

// textAt is where a string's bytes are.
func textAt(s string) uintptr { return uintptr(unsafe.Pointer(unsafe.StringData(s))) }
