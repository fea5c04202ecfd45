//go:build linux

package wasmrt

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resident reports, per page of b (which starts at a page boundary),
// whether it is resident.
func resident(t *testing.T, b []byte) []bool {
	t.Helper()
	page := syscall.Getpagesize()
	vec := make([]byte, len(b)/page)
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(vec)*page), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// TestDropZeroPages: of a private anonymous mapping, the resident pages
// that hold only zeros are given back, and read as zeros; a page holding
// any other byte is kept as it is; a page never touched is not read.
func TestDropZeroPages(t *testing.T) {
	page := syscall.Getpagesize()
	for _, tc := range []struct {
		name string
		// write sets up the mapping, 8 pages.
		write        func(b []byte)
		wantDropped  int // pages
		wantResident []bool
	}{
		{"a page written with zeros is given back", func(b []byte) { clear(b[:page]) }, 1,
			[]bool{false, false, false, false, false, false, false, false}},
		{"a page with one byte set is kept", func(b []byte) { b[page+page-1] = 1 }, 0,
			[]bool{false, true, false, false, false, false, false, false}},
		{"runs of zeros around data", func(b []byte) {
			clear(b[:3*page])
			b[2*page] = 7
			clear(b[5*page : 8*page])
		}, 5, []bool{false, false, true, false, false, false, false, false}},
		{"a page never touched is not read", func([]byte) {}, 0,
			[]bool{false, false, false, false, false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, mapped := reserve(PageSize)
			require.True(t, mapped)
			defer release(b)
			b = b[:8*page]
			tc.write(b)
			// Reading b would fault its pages in: what it holds is
			// what the same writes make of a buffer.
			want := make([]byte, len(b))
			tc.write(want)
			require.Equal(t, tc.wantDropped*page, dropZeroPages(b))
			assert.Equal(t, tc.wantResident, resident(t, b))
			assert.True(t, bytes.Equal(want, b), "the memory reads otherwise")
		})
	}
	t.Run("a start off a page boundary is refused", func(t *testing.T) {
		b, mapped := reserve(PageSize)
		require.True(t, mapped)
		defer release(b)
		clear(b[:2*page])
		require.Zero(t, dropZeroPages(b[1:2*page]))
		assert.Equal(t, []bool{true, true}, resident(t, b[:2*page]))
	})
}

// TestSettleAfterInit: once a Go guest's runtime has started, no page
// past its image holds only zeros and stays resident (its runtime clears
// the memory it skips to align its heap), and the instance goes on
// serving calls, on either engine.
func TestSettleAfterInit(t *testing.T) {
	ctx := context.Background()
	wasm := pluginWasm(t)
	for _, kind := range []string{"compiler", "interpreter"} {
		t.Run(kind, func(t *testing.T) {
			m := compileOn(t, kind, wasm, testPages)
			in, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			_, err = in.Call(ctx, "describe", nil)
			require.NoError(t, err)

			mem := in.mem.memories[0]
			require.True(t, mem.mapped)
			from := uint64(0)
			if in.code.image != nil {
				from = in.code.image.mapped()
			}
			b := mem.reserved[from:min(mem.size, from+settleScan)]
			page := syscall.Getpagesize()
			zero := make([]byte, page)
			var written, zeros int
			for i, r := range resident(t, b) {
				if r {
					written++
					if bytes.Equal(b[i*page:(i+1)*page], zero) {
						zeros++
					}
				}
			}
			require.NotZero(t, written, "the guest wrote past its image")
			assert.Zero(t, zeros, "%d of the %d pages the guest wrote past its image hold only zeros", zeros, written)

			store := []byte(`{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user","contents":[{"type":"text","text":"hello"}]}],"response_messages":[]}`)
			_, err = in.Call(ctx, "store", store)
			require.NoError(t, err)
			_, err = in.Call(ctx, "describe", nil)
			require.NoError(t, err)
		})
	}
}

// TestSettleKeepsTheImage: settle gives back no page of the image's
// mapping, where a page given back would read as the image again: a page
// of the image the guest cleared stays clear, while a cleared page past
// the image is given back.
func TestSettleKeepsTheImage(t *testing.T) {
	ctx := context.Background()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	comp, want, _ := compileImage(t, c, nil)
	require.NotNil(t, comp.image)
	in, err := comp.newInstance(ctx, 4)
	require.NoError(t, err)
	defer in.mod.Close(ctx)
	page := syscall.Getpagesize()
	inImage := uint32(2 * page) // the image holds other bytes there
	require.NotEqual(t, make([]byte, page), want[inImage:int(inImage)+page])
	past := uint32(comp.image.mapped()) + uint32(page)
	for _, at := range []uint32{inImage, past} {
		require.True(t, in.mod.Memory().Write(at, make([]byte, page)))
	}

	in.mem.settle()

	got, ok := in.mod.Memory().Read(inImage, uint32(page))
	require.True(t, ok)
	assert.Equal(t, make([]byte, page), got, "a page of the image the guest cleared reads as the image again")
	mem := in.mem.memories[0]
	assert.Equal(t, []bool{false}, resident(t, mem.reserved[past:int(past)+page]), "a cleared page past the image stays resident")
}
