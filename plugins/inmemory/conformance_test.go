//go:build !wasip1

package main

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

var _ sdktest.Subject = (*host.Plugin)(nil)

// TestConformance runs the conformance suite against the plugin twice: its
// Go code loaded natively, and its WebAssembly build, both through the host,
// so the host's state handling (patches, selections) is part of what passes.
func TestConformance(t *testing.T) {
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })

	t.Run("native", func(t *testing.T) {
		sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
			return h.LoadNative(ctx, provider.Name, sdk.Handler(provider.Provider{}), host.LoadOptions{})
		})
	})
	t.Run("wasm", func(t *testing.T) {
		// The import path, not ".": BuildPlugin names its output after the
		// path it is given, and "." would be the name of every plugin.
		wasm := sdktest.BuildPlugin(t, "github.com/wasmhist/wasmhist/plugins/inmemory")
		if fi, err := os.Stat(wasm); err == nil {
			t.Logf("%s: %d bytes", wasm, fi.Size())
		}
		// Each subject is a separate load, so its instances are its own;
		// the module is compiled once per process.
		sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
			return h.Load(ctx, host.File(wasm), host.LoadOptions{})
		})
	})
}
