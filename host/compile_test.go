package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// pluginOf is a module with the ABI's marker and required exports (each
// returning 0) and f, which would compile first.
func pluginOf(f wasmtest.Func) []byte {
	var stubs []wasmtest.Func
	for _, name := range append([]string{abi.MarkerExport}, abi.RequiredExports()...) {
		stubs = append(stubs, wasmtest.Func{Results: []byte{wasmtest.I32}, Code: []byte{0x41, 0x00}, Export: name})
	}
	return wasmtest.Bomb(f, stubs...)
}

// TestLoadRefusesCompileBombs: a plugin whose code would make the compiler
// take seconds and hundreds of megabytes is refused before it is
// compiled, with ErrCompileLimit and a message that names the construct.
func TestLoadRefusesCompileBombs(t *testing.T) {
	h := newHost(t, host.Config{CacheDir: t.TempDir()})
	tests := []struct {
		name     string
		f        wasmtest.Func
		mentions string
	}{
		// 100 KB; 1.7 s and 246 MB to compile, 40 such tables 20 s and 967 MB.
		{"br_table targets", wasmtest.BrTable(1, 10, 10_000, 0), "too many br_table targets: its br_table instructions have 100000 targets in all"},
		// 60 KB; 31 s to compile.
		{"nested loops", wasmtest.Nested(0x03, 20_000), "blocks nested too deep: 20000 blocks, loops and ifs"},
		{"nested blocks", wasmtest.Nested(0x02, 50_000), "blocks nested too deep: 50000 blocks"},
		{"many locals", wasmtest.Sequence(1, 60_000), "too many locals: function 0 declares 60000 locals"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Load(context.Background(), host.Bytes("bomb", pluginOf(tt.f)), host.LoadOptions{})
			require.ErrorIs(t, err, host.ErrCompileLimit)
			require.ErrorIs(t, err, host.ErrInvalidPlugin)
			assert.ErrorContains(t, err, tt.mentions)
			assert.ErrorContains(t, err, "split the function")
		})
	}
}
