package host

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// interpreted reports whether p's new instances run on wazero's
// interpreter.
func interpreted(t *testing.T, p *Plugin) bool {
	t.Helper()
	b, ok := p.backend.(*wasmBackend)
	require.True(t, ok, "a WebAssembly plugin")
	return b.module.Interpreted()
}

// TestPluginCompiled: a plugin's first use runs on the interpreter;
// Compiled waits for its compilation, after which it runs compiled and a
// second host on the same cache loads it compiled from the start. A
// context that ends first ends the wait with its error, and a plugin
// loaded warm or natively returns at once.
func TestPluginCompiled(t *testing.T) {
	ctx := context.Background()
	wasm := sdktest.BuildPlugin(t, "../plugins/inmemory")
	dir := t.TempDir()

	first, err := New(ctx, Config{CacheDir: dir})
	require.NoError(t, err)
	defer first.Close(ctx)
	p, err := first.Load(ctx, File(wasm), LoadOptions{})
	require.NoError(t, err)
	require.True(t, interpreted(t, p), "a never-seen plugin starts on the interpreter")

	ended, cancel := context.WithCancel(ctx)
	cancel()
	err = p.Compiled(ended)
	require.ErrorIs(t, err, context.Canceled, "the compilation takes a compile process and seconds; the ended context comes first")
	assert.ErrorContains(t, err, "waiting for plugin inmemory to compile")

	require.NoError(t, p.Compiled(ctx))
	assert.False(t, interpreted(t, p), "after Compiled, new instances run the compiled code")

	second, err := New(ctx, Config{CacheDir: dir})
	require.NoError(t, err)
	defer second.Close(ctx)
	warm, err := second.Load(ctx, File(wasm), LoadOptions{})
	require.NoError(t, err)
	assert.False(t, interpreted(t, warm), "Compiled left the code in the cache: a new host loads it compiled")
	require.NoError(t, warm.Compiled(ended), "a plugin loaded compiled is compiled: no wait, whatever the context")

	native, err := second.LoadNative(ctx, provider.Name, sdk.Handler(provider.Provider{}), LoadOptions{})
	require.NoError(t, err)
	require.NoError(t, native.Compiled(ended), "a native plugin has nothing to compile")
}
