package wasmbin

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestS32: AppendS32 and Reader.S32 agree on every width of encoding, and
// an encoding past 32 bits is refused.
func TestS32(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8193, 1 << 20, -(1 << 27), math.MaxInt32, math.MinInt32} {
		b := AppendS32(nil, v)
		r := &Reader{B: b}
		require.Equal(t, v, r.S32(), "% x", b)
		require.NoError(t, r.Err)
		assert.Equal(t, len(b), r.Off, "the whole encoding read")
	}
	for name, b := range map[string][]byte{
		"2^31":          {0x80, 0x80, 0x80, 0x80, 0x08},
		"-2^31-1":       {0xff, 0xff, 0xff, 0xff, 0x77},
		"six bytes":     {0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
		"cut short":     {0x80, 0x80},
		"nothing there": {},
	} {
		r := &Reader{B: b}
		assert.Zero(t, r.S32(), name)
		assert.Error(t, r.Err, name)
	}
}
