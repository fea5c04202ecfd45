package wasmrt

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/wasmhist/wasmhist/abi"
)

// TestKernelMatchesGoSDK runs the same calls through this package's
// kernel and through go-sdk v1.7.1 (the reference Extism host for Go, which
// runs the Extism kernel's own WebAssembly) and requires the same answers:
// outputs, the plugin's errors, and a trap where go-sdk traps. The plugin
// is the in-memory one, so the direct transport (SPEC section 2.5) is in
// use on this side; go-sdk exercises the kernel path of the same module.
func TestKernelMatchesGoSDK(t *testing.T) {
	ctx := context.Background()
	wasm := hostileWasm(t, "misbehave")
	inmem := pluginWasm(t)
	store := `{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user","contents":[{"type":"text","text":"héllo \u2028 \ud800"}]}],"response_messages":[]}`
	tests := []struct {
		name   string
		wasm   []byte
		export string
		input  string
	}{
		{"describe", inmem, abi.ExportDescribe, ""},
		{"store", inmem, abi.ExportStore, store},
		{"store, odd length", inmem, abi.ExportStore, store + " "},
		{"provide, malformed", inmem, abi.ExportProvide, `{"session":`},
		{"plugin error", wasm, abi.ExportProvide, `{"x":"hostile:error"}`},
		{"panic", wasm, abi.ExportProvide, `{"x":"hostile:panic"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := newEngine(t, userCache(t)).Compile(ctx, sha256.Sum256(tt.wasm), tt.wasm, testPages)
			require.NoError(t, err)
			defer m.Release(ctx)
			in, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			got, gotErr := in.Call(ctx, tt.export, []byte(tt.input))

			ref := referencePlugin(t, tt.wasm)
			rc, want, wantErr := ref.CallWithContext(ctx, tt.export, []byte(tt.input))
			var exit interface{ ExitCode() uint32 }
			switch {
			case wantErr == nil && rc == 0:
				require.NoError(t, gotErr)
				assert.Equal(t, string(want), string(got))
			case wantErr != nil && ref.GetError() == wantErr.Error():
				// go-sdk returns the text of error_set as the error.
				var pe *abi.Error
				require.ErrorAs(t, gotErr, &pe)
				assert.Equal(t, abi.DecodeError([]byte(wantErr.Error())).Error(), pe.Error())
			case wantErr != nil && !errors.As(wantErr, &exit):
				require.Error(t, gotErr, "go-sdk trapped: %v", wantErr)
				var pe *abi.Error
				assert.False(t, errors.As(gotErr, &pe), "a trap became a plugin error: %v", gotErr)
			default:
				t.Fatalf("unexpected reference result: rc %d, %v", rc, wantErr)
			}
		})
	}
}

// pluginWasm builds the in-memory plugin.
func pluginWasm(t testing.TB) []byte {
	t.Helper()
	return buildWasm(t, "github.com/wasmhist/wasmhist/plugins/inmemory")
}

// referencePlugin instantiates wasm with go-sdk, as a stock Extism host
// would, with the capability namespace stubbed.
func referencePlugin(t *testing.T, wasm []byte) *extism.Plugin {
	t.Helper()
	ctx := context.Background()
	echo := extism.NewHostFunctionWithStack("echo", func(context.Context, *extism.CurrentPlugin, []uint64) {},
		[]extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
	echo.SetNamespace(abi.CapabilityModule)
	cache := userCache(t)
	p, err := extism.NewPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}},
		extism.PluginConfig{EnableWasi: true, RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(cache.cache)},
		[]extism.HostFunction{echo})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(ctx) })
	return p
}
