package wasmrt

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKernelBlocks(t *testing.T) {
	tr := newMemoryTracker(1<<20, nil)
	k := newKernel(1<<20, tr)
	require.True(t, k.setInput([]byte("0123456789")))
	assert.Equal(t, uint64(10), k.inputLen)
	assert.Equal(t, uint64(10), k.length(k.input))
	assert.Equal(t, "0123456789", string(k.bytes(k.input, 10)))

	a := k.alloc(3)
	b := k.alloc(16)
	require.NotZero(t, a)
	assert.Zero(t, a%kernelAlign, "blocks are aligned")
	assert.Equal(t, uint64(3), k.length(a))
	assert.Equal(t, uint64(16), k.length(b))
	assert.Zero(t, k.length(a+1), "no block starts inside another")
	assert.Zero(t, k.alloc(0))

	k.free(a)
	assert.Zero(t, k.length(a))
	k.free(b) // the last block: its memory is reused
	assert.Equal(t, b, k.alloc(8))

	assert.PanicsWithValue(t, errKernelBounds, func() { k.bytes(k.top, 1) }, "past what was handed out traps")
	assert.PanicsWithValue(t, errKernelBounds, func() { k.inputAt(10) }, "past the input traps")

	// A block of an earlier call shows none of its bytes.
	copy(k.bytes(b, 8), "secret!!")
	require.True(t, k.setInput(nil))
	c := k.alloc(64)
	assert.Equal(t, make([]byte, 64), k.bytes(c, 64))

	assert.Zero(t, k.alloc(1<<20), "past the limit")
	assert.True(t, tr.Refused(), "a refused alloc counts as a refused growth")
}

func TestKernelVars(t *testing.T) {
	k := newKernel(1<<20, newMemoryTracker(1<<20, nil))
	k.reset()
	k.varSet(k.write([]byte("a")), k.write([]byte("value")))
	got := k.varGet(k.write([]byte("a")))
	assert.Equal(t, "value", string(k.blockCopy(got)))
	k.varSet(k.write([]byte("a")), 0)
	assert.Zero(t, k.varGet(k.write([]byte("a"))))
	assert.Zero(t, k.varBytes)
}
