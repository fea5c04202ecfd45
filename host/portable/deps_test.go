package portable_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDependsOnDataOnly: the document is plain data, so the package
// depends on the contract, the session value and the Chat mapping, never
// on a plugin runtime, the agent or a store, and links neither SQLite nor
// PostgreSQL nor wazero.
func TestDependsOnDataOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"github.com/wasmhist/wasmhist/host", "github.com/wasmhist/wasmhist/host/agent",
			"github.com/wasmhist/wasmhist/host/internal/txn", "github.com/wasmhist/wasmhist/host/store/sqlitestore",
			"github.com/wasmhist/wasmhist/host/store/pgstore", "github.com/wasmhist/wasmhist/host/store",
		} {
			assert.NotEqual(t, banned, dep)
		}
		for _, module := range []string{"github.com/tetratelabs/wazero", "modernc.org/sqlite", "github.com/jackc/pgx/"} {
			assert.False(t, strings.HasPrefix(dep, module), "links %s", dep)
		}
	}
}
