package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestNewSQLPlugin: `new plugin --sql` writes a database plugin that, out
// of the clone, tidies, builds, passes `wasmhist conformance` (on a scratch
// SQLite database), has a conformance test that compiles, and passes the
// suite on a schema of a real PostgreSQL database.
func TestNewSQLPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin module from scratch")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "notes")
	invocation{}.ok(t, "new", "plugin", "notes", "--sql", "--dir", dir, "--wasmhist", root)
	for _, f := range []string{"go.mod", "Makefile", "main.go", "conformance_test.go", "provider/provider.go", "provider/schema.go"} {
		_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f)))
		require.NoError(t, err, "new plugin --sql wrote no %s", f)
	}
	provider, err := os.ReadFile(filepath.Join(dir, "provider", "provider.go"))
	require.NoError(t, err)
	assert.Contains(t, string(provider), `const Name = "notes"`)
	makefile, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	require.NoError(t, err)
	assert.Contains(t, string(makefile), "notes.wasm: go.mod $(wildcard *.go provider/*.go)\n", "a change to the provider rebuilds the plugin")

	goCmd(t, dir, nil, "mod", "tidy")
	goCmd(t, dir, []string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-o", "notes.wasm", ".")
	conf := invocation{dir: dir}.ok(t, "conformance", "notes.wasm")
	assert.Contains(t, conf, "conformance of notes ")
	assert.Contains(t, conf, "PASS  rolled_back_run_leaves_nothing")
	assert.Contains(t, conf, " 0 failed, 1 skipped\n")
	// The template's own test compiles (running it would repeat the
	// conformance run above).
	goCmd(t, dir, nil, "vet", "./...")

	srv := pgtest.Start(t)
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	defer h.Close(context.Background())
	grant := pggrant.New(pggrant.Config{Name: "main", AdminDSN: srv.DSN("postgres"), Schema: "notes"})
	wasm := filepath.Join(dir, "notes.wasm")
	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
		return h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{grant}})
	})
}
