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
			defer releaseSingly()
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
// around them.
func TestCodeFaultsInSinglePages(t *testing.T) {
	ctx := context.Background()
	_, code, in := mappedInstance(t)
	for _, fn := range []string{"describe", "store"} {
		_, err := in.Call(ctx, fn, storeRequest)
		require.NoError(t, err)
	}
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
