package host_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinksOnlyWhatItImports: SQLite comes with the sql capability's
// package, not with the host, so a program importing only host does not
// link it; no program links go-sdk. The capability package is the control that the check can fail.
func TestLinksOnlyWhatItImports(t *testing.T) {
	tests := []struct {
		name     string
		pkg      string
		sqlite   bool
		postgres bool
	}{
		{"host only", "./testdata/onlyhost", false, false},
		{"the sql capability", "./sqlgrant", true, false},
		{"the sql capability on PostgreSQL", "./pggrant", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command(goTool(), "list", "-deps", tt.pkg).CombinedOutput()
			require.NoError(t, err, "%s", out)
			deps := strings.Fields(string(out))
			require.Contains(t, deps, "github.com/wasmhist/wasmhist/host")
			// The host provides go-sdk's kernel itself; go-sdk (and the
			// protobuf and observe-sdk it brings) is the tests' reference
			// host only.
			assert.NotContains(t, deps, "github.com/extism/go-sdk")
			if tt.sqlite {
				assert.Contains(t, deps, "modernc.org/sqlite")
			} else {
				assert.NotContains(t, deps, "modernc.org/sqlite")
			}
			if tt.postgres {
				assert.Contains(t, deps, "github.com/jackc/pgx/v5/pgconn")
			} else {
				assert.NotContains(t, deps, "github.com/jackc/pgx/v5/pgconn")
			}
		})
	}
}

// goTool is the go command; go test puts the running toolchain's bin
// directory first in PATH, so this is the toolchain running the test.
func goTool() string { return "go" }

// TestPublicAPIHasNoInternalTypes: the documentation of the public packages
// names no type of an internal package, so an embedder can write every
// value the API takes or returns.
func TestPublicAPIHasNoInternalTypes(t *testing.T) {
	for _, pkg := range []string{".", "./sqlgrant", "./pggrant"} {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command(goTool(), "doc", "-all", pkg).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.NotEmpty(t, out)
			for _, internal := range []string{"internal/", "capability.", "wasmrt.", "sqlcap.", "pgcap."} {
				assert.NotContains(t, string(out), internal)
			}
		})
	}
}
