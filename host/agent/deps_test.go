package agent_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAgentLinksNoDatabase: a program that imports the agent links neither
// SQLite nor the PostgreSQL driver; the stores that need them are packages
// of their own, which do (so the check can fail).
func TestAgentLinksNoDatabase(t *testing.T) {
	deps := func(pkg string) string {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "go list -deps %s:\n%s", pkg, out)
		return string(out)
	}
	agent := deps(".")
	for _, db := range []string{"modernc.org/sqlite\n", "github.com/jackc/pgx/v5\n"} {
		assert.False(t, strings.Contains(agent, db), "host/agent links %s", strings.TrimSpace(db))
	}
	assert.Contains(t, deps("../store/sqlitestore"), "modernc.org/sqlite\n")
	assert.Contains(t, deps("../store/pgstore"), "github.com/jackc/pgx/v5\n")
}
