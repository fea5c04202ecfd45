package wasmrt

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
)

// addModule exports add(i32, i32) i32, whose body is 6 bytes.
var addModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type: (i32, i32) -> i32
	0x03, 0x02, 0x01, 0x00, // function 0 has type 0
	0x07, 0x07, 0x01, 0x03, 'a', 'd', 'd', 0x00, 0x00, // export "add"
	0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b, // local.get 0, local.get 1, i32.add
}

// TestReleaseCodeBodiesPinned checks that releaseCodeBodies still finds
// wazero's function bodies (it reaches them through wazero's unexported
// fields, as of the go.mod version v1.9.0), and that a module whose bodies
// are released still instantiates and runs.
func TestReleaseCodeBodiesPinned(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(userCache(t).cache))
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, addModule)
	require.NoError(t, err)
	require.Equal(t, 6, releaseCodeBodies(m),
		"releaseCodeBodies found no function bodies: wazero's compiledModule.module.CodeSection[i].Body moved (the code knows github.com/tetratelabs/wazero v1.9.0)")
	require.Equal(t, 0, releaseCodeBodies(m), "released twice")
	for range 2 {
		in, err := rt.InstantiateModule(ctx, m, wazero.NewModuleConfig().WithName(""))
		require.NoError(t, err)
		got, err := in.ExportedFunction("add").Call(ctx, 2, 3)
		require.NoError(t, err)
		require.Equal(t, []uint64{5}, got)
		require.NoError(t, in.Close(ctx))
	}
}
