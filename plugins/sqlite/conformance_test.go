//go:build !wasip1

package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

const importPath = "github.com/wasmhist/wasmhist/plugins/sqlite"

func newHost(t *testing.T) *host.Host {
	t.Helper()
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// inRuns is a loaded plugin whose calls the suite's failure cases can group
// in runs, committed or rolled back as an agent run's are (host.InRun), as
// `wasmhist conformance` groups them.
type inRuns struct{ *host.Plugin }

func (p inRuns) InRun(ctx context.Context, commit bool, f func(context.Context) error) error {
	return host.InRun(ctx, commit, f)
}

func inRun(p *host.Plugin, err error) (sdktest.Subject, error) {
	if err != nil {
		return nil, err
	}
	return inRuns{p}, nil
}

// TestConformance runs the conformance suite against the WebAssembly build
// through the host with a real database, its failure cases in runs. The plugin has no native run: its
// storage is a host capability that exists only across the boundary.
func TestConformance(t *testing.T) {
	h := newHost(t)
	db := filepath.Join(t.TempDir(), "history.db")
	wasm := sdktest.BuildPlugin(t, importPath)
	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
		return inRun(h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}}))
	})
}

// TestConformancePostgreSQL runs the same suite with the same build granted
// a schema of a real PostgreSQL database: the plugin's SQL is written for
// both dialects.
func TestConformancePostgreSQL(t *testing.T) {
	srv := pgtest.Start(t)
	h := newHost(t)
	wasm := sdktest.BuildPlugin(t, importPath)
	grant := pggrant.New(pggrant.Config{Name: "main", AdminDSN: srv.DSN("postgres"), Schema: "history"})
	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
		return inRun(h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{grant}}))
	})
}

func TestLoadWithoutGrant(t *testing.T) {
	h := newHost(t)
	wasm := sdktest.BuildPlugin(t, importPath)
	_, err := h.Load(t.Context(), host.File(wasm), host.LoadOptions{})
	require.ErrorIs(t, err, host.ErrCapabilityDenied, "load without the sql grant")
}
