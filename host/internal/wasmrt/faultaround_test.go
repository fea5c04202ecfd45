//go:build linux

package wasmrt

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultWindow is the kernel's default fault-around window.
const faultWindow = 64 << 10

// refusedHere reports why this machine's kernel or sandbox refuses the
// userfaultfd, "" when it allows it. A refusal must be lasting: the host
// then keeps the windows for every build, which the tests check instead.
func refusedHere(t *testing.T) string {
	t.Helper()
	if err := singlePages.hold(); err != nil {
		require.True(t, lasting(err), "a refusal the host would try again on each start: %v", err)
		return err.Error()
	}
	singlePages.let()
	return ""
}

// registered reports whether the mapping that starts at code is registered
// with a userfaultfd for write-protect faults (VmFlags "uw" in smaps).
func registered(t *testing.T, code []byte) bool {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	head := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(&code[0])))
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, head):
			in = true
		case in && strings.HasPrefix(line, "VmFlags:"):
			return strings.Contains(line+" ", " uw ")
		}
	}
	require.True(t, in, "no mapping starts at the code")
	return false
}

// TestFaultSingly: in a private mapping of a file registered by
// faultSingly, a read maps the page it faulted on and no other; without
// the registration the kernel maps a window around it, which is what the
// registration is for. Where the kernel refuses, the refusal is lasting.
func TestFaultSingly(t *testing.T) {
	if why := refusedHere(t); why != "" {
		t.Logf("the userfaultfd is refused here (%s): the host keeps the windows", why)
		return
	}
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
			require.NoError(t, singlePages.hold())
			defer singlePages.let()
			require.NoError(t, singlePages.faultSingly(code))
			require.True(t, registered(t, code))
			defer func() {
				singlePages.faultWindows(code)
				assert.False(t, registered(t, code), "registered off")
			}()
		}
		sum := 0
		for i := 0; i < len(code); i += faultWindow {
			sum += int(code[i])
		}
		require.Equal(t, size/faultWindow*0xC3, sum)
		return mappedPages(t, code[:size-syscall.Getpagesize()])
	}
	reads := size / faultWindow
	require.Greater(t, touch(false), reads, "without the registration a fault maps a window around its page (fault_around_bytes)")
	assert.Equal(t, reads, touch(true), "pages mapped after one read in each 64 KiB")

	require.NoError(t, singlePages.hold())
	defer singlePages.let()
	err := singlePages.faultSingly(make([]byte, 3*syscall.Getpagesize())[1:])
	assert.ErrorContains(t, err, "registering", "a range the kernel refuses is an error, not a panic")
}

// TestCodeFaultsInSinglePages: once the module's first guest has started,
// the calls on it map the pages of its code they run, not whole windows
// around them; while another instance's guest starts, the code is
// registered off, so that faults map windows (the start gives every page
// back), and on again after it. Where the kernel refuses, the code runs
// with windows (TestRefusalsAtStart: the module does not ask again).
func TestCodeFaultsInSinglePages(t *testing.T) {
	ctx := context.Background()
	m, code, in := mappedInstance(t)
	faults := &m.cur.Load().faults
	state := func() (single, refused bool) {
		faults.mu.Lock()
		defer faults.mu.Unlock()
		return faults.single, faults.refused
	}
	why := refusedHere(t)
	require.False(t, registered(t, code), "registered before the first start")
	in.testStarted = func() { assert.False(t, registered(t, code), "registered during a start") }
	_, err := in.Call(ctx, "describe", nil)
	require.NoError(t, err)
	if why != "" {
		single, refused := state()
		assert.True(t, !single && refused && !registered(t, code), "the module keeps the windows where %s", why)
		return
	}
	require.True(t, registered(t, code), "registered once the start returned")

	other, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer other.Close(ctx)
	other.testStarted = func() { assert.False(t, registered(t, code), "registered during another instance's start") }
	_, err = other.Call(ctx, "describe", nil)
	require.NoError(t, err)
	require.True(t, registered(t, code), "registered once the other start returned")
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

	// What Close does first, while the code is still mapped.
	m.cur.Load().releaseText()
	assert.False(t, registered(t, code), "registered after the module closed")
}

// TestLastingRefusals: a refusal that comes again for any code keeps a
// module's windows for good; one of the moment (no file descriptor, no
// memory) is tried again at the next start.
func TestLastingRefusals(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.ENOSYS, syscall.EPERM, syscall.EINVAL, syscall.EOPNOTSUPP} {
		assert.True(t, lasting(fmt.Errorf("userfaultfd: %w", e)), "%v", e)
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN} {
		assert.False(t, lasting(fmt.Errorf("userfaultfd: %w", e)), "%v", e)
	}
}

// TestRefusalsAtStart: a refusal of the moment leaves the windows until
// the next start, which asks again; a lasting one leaves them for good,
// and the module does not ask again.
func TestRefusalsAtStart(t *testing.T) {
	if why := refusedHere(t); why != "" {
		t.Logf("the userfaultfd is refused here (%s): the host keeps the windows", why)
		return
	}
	for _, tc := range []struct {
		name   string
		errno  syscall.Errno
		asks   int  // how often the module asked, after two starts
		single bool // and whether it got single pages in the end
	}{
		{"of the moment", syscall.EMFILE, 2, true},
		{"lasting", syscall.EPERM, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, code, in := mappedInstance(t)
			asks := 0
			m.cur.Load().faults.testHold = func() error {
				if asks++; asks == 1 {
					return fmt.Errorf("userfaultfd: %w", tc.errno)
				}
				return singlePages.hold()
			}
			_, err := in.Call(ctx, "describe", nil)
			require.NoError(t, err)
			assert.False(t, registered(t, code), "registered after a refusal")
			other, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer other.Close(ctx)
			_, err = other.Call(ctx, "describe", nil)
			require.NoError(t, err)
			assert.Equal(t, tc.asks, asks, "times the module asked for the userfaultfd")
			assert.Equal(t, tc.single, registered(t, code))
		})
	}
}

// TestOverlappingStarts: while any instance's guest starts, the code
// stays registered off, though another start returned meanwhile.
func TestOverlappingStarts(t *testing.T) {
	if why := refusedHere(t); why != "" {
		t.Logf("the userfaultfd is refused here (%s): the host keeps the windows", why)
		return
	}
	ctx := context.Background()
	m, code, in := mappedInstance(t)
	_, err := in.Call(ctx, "describe", nil)
	require.NoError(t, err)
	require.True(t, registered(t, code))

	first, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer first.Close(ctx)
	second, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer second.Close(ctx)
	first.testStarted = func() {
		// The first start has not returned: the second one starts, and
		// returns, within it.
		second.testStarted = func() { assert.False(t, registered(t, code), "registered during two starts") }
		_, err := second.Call(ctx, "describe", nil)
		assert.NoError(t, err)
		assert.False(t, registered(t, code), "registered while the first start runs")
	}
	_, err = first.Call(ctx, "describe", nil)
	require.NoError(t, err)
	assert.True(t, registered(t, code), "registered once both starts returned")
}
