package wasmrt

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// TestSkeletonIDNeverRunsStubs: a load from the skeleton names wazero's
// entry by the id kept beside the skeleton, and keeps what it compiled
// only under that id. An id naming another module's code (kept by
// mistake, or forged), with the skeleton's length and checksum, leaves the
// load the whole way: the skeleton's stubs never run, and neither does the
// other module's code.
func TestSkeletonIDNeverRunsStubs(t *testing.T) {
	ctx := context.Background()
	subtracter := wasmtest.Module{Funcs: []wasmtest.Func{{
		Params:  []byte{wasmtest.I32, wasmtest.I32},
		Results: []byte{wasmtest.I32},
		Code:    []byte{0x20, 0x00, 0x20, 0x01, 0x6b}, // local.get 0, local.get 1, i32.sub
		Export:  "add",
	}}, Memory: true}.Bytes()
	dir := t.TempDir()
	run := func(wasm []byte) (uint64, bool) {
		c, err := NewCache(dir)
		require.NoError(t, err)
		defer c.Close(ctx)
		e := NewEngine(c, nil)
		defer e.Close(ctx)
		m, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
		require.NoError(t, err)
		in, err := m.NewInstance(ctx, testPages)
		require.NoError(t, err)
		defer in.Close(ctx)
		got, err := in.mod.ExportedFunction("add").Call(ctx, 5, 3)
		require.NoError(t, err)
		in.code.returned()
		<-m.Compiled()
		require.NoError(t, m.CompileErr())
		return got[0], m.code().skeleton
	}
	for _, wasm := range [][]byte{adder, subtracter} {
		run(wasm)
		_, skeleton := run(wasm)
		require.True(t, skeleton, "a warm load compiles the skeleton")
	}
	got, skeleton := run(adder)
	require.Equal(t, uint64(8), got)
	require.True(t, skeleton)

	// The adder's id record names the subtracter's skeleton's id.
	c, err := NewCache(dir)
	require.NoError(t, err)
	defer c.Close(ctx)
	read := func(wasm []byte) (skel []byte, sum [32]byte) {
		sum = sha256.Sum256(wasm)
		f, err := os.ReadFile(c.skeletonPath(sum))
		require.NoError(t, err)
		return f[:len(f)-crcSize], sum
	}
	addSkel, addSum := read(adder)
	subSkel, _ := read(subtracter)
	other := codeID(subSkel)
	forged := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(len(addSkel))), crc32.Checksum(addSkel, castagnoli))
	require.NoError(t, writeAtomic(c.skeletonIDPath(addSum), append(forged, other[:]...)))

	got, skeleton = run(adder)
	require.Equal(t, uint64(8), got, "5 + 3")
	require.False(t, skeleton, "the load kept a skeleton compiled under another id")
	_, skeleton = run(adder)
	require.True(t, skeleton, "the next load compiles the skeleton again")
}
