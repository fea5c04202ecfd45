//go:build linux

package wasmrt

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultWindow is the kernel's default fault-around window.
const faultWindow = 64 << 10

// TestFaultSingly: in a private mapping of a file registered by
// faultSingly, a read maps the page it faulted on and no other; without
// the registration the kernel maps a window around it, which is what the
// registration is for.
func TestFaultSingly(t *testing.T) {
	const size = 1 << 20
	path := filepath.Join(t.TempDir(), "code.bin")
	// Ends inside a page, as machine code does.
	require.NoError(t, writePaged(path, bytes.Repeat([]byte{0xC3}, size-100)))
	touch := func(register bool) int {
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		code, err := syscall.Mmap(int(f.Fd()), 0, size-100, syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE)
		require.NoError(t, err)
		defer syscall.Munmap(code)
		if register {
			require.NoError(t, faultSingly(code), "this machine's kernel turns fault-around off for a userfaultfd's range (Linux 6.7)")
			defer faultWindows(code)
		}
		sum := 0
		for i := 0; i < len(code); i += faultWindow {
			sum += int(code[i])
		}
		require.Equal(t, size/faultWindow*0xC3, sum)
		return mappedPages(t, code[:size-syscall.Getpagesize()])
	}
	reads := size / faultWindow
	require.Greater(t, touch(false), reads, "without the registration a fault maps a window around its page")
	assert.Equal(t, reads, touch(true), "pages mapped after one read in each 64 KiB")

	err := faultSingly(make([]byte, 3*syscall.Getpagesize())[1:])
	assert.ErrorContains(t, err, "registering", "a range the kernel refuses is an error, not a panic")
}

// TestCodeFaultsInSinglePages: once the module's first guest has started,
// the calls on it map the pages of its code they run, not whole windows
// around them; while another instance's guest starts, faults map windows
// (the start gives every page back), and single pages again after it.
func TestCodeFaultsInSinglePages(t *testing.T) {
	ctx := context.Background()
	m, code, in := mappedInstance(t)
	faults := &m.cur.Load().faults
	single := func() bool {
		faults.mu.Lock()
		defer faults.mu.Unlock()
		return faults.single
	}
	require.False(t, single(), "registered before the first start")
	in.testStarted = func() { assert.False(t, single(), "single pages during a start") }
	_, err := in.Call(ctx, "describe", nil)
	require.NoError(t, err)
	require.True(t, single(), "single pages once the start returned")

	other, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer other.Close(ctx)
	other.testStarted = func() { assert.False(t, single(), "single pages during another instance's start") }
	_, err = other.Call(ctx, "describe", nil)
	require.NoError(t, err)
	require.True(t, single(), "single pages once the other start returned")
	in.code.dropText()
	_, err = in.Call(ctx, "store", storeRequest)
	require.NoError(t, err)

	page := syscall.Getpagesize()
	pages, windows := 0, 0
	at := int(uintptr(unsafe.Pointer(&code[0])) % faultWindow)
	for start := -at; start < len(code); start += faultWindow {
		lo, hi := max(start, 0), min(start+faultWindow, len(code)/page*page)
		if hi <= lo {
			continue
		}
		if n := mappedPages(t, code[lo:hi]); n > 0 {
			pages += n
			windows++
		}
	}
	t.Logf("%d pages mapped in %d windows", pages, windows)
	require.NotZero(t, windows, "the calls ran no code")
	assert.Less(t, pages, windows*faultWindow/page/2, "the windows the calls touched are mostly mapped whole")
}
