//go:build linux

package wasmrt

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A read fault in a private mapping of a file maps not only the page it
// faulted on but the kernel's fault-around window around it (64 KiB by
// default, system-wide), from the page cache: a turn that runs one page
// of a window holds all sixteen. The kernel maps no window in a range
// registered with a userfaultfd for write-protect faults. Since Linux 6.7
// (UFFD_FEATURE_WP_ASYNC) such a registration accepts a private mapping
// of a file and needs no thread to serve faults: the kernel resolves them
// itself. The code is never written, so never protected: the registration
// only makes a fault map its own page (RATIONALE: "Why does a build's code
// fault in one page at a time?").

// Linux's userfaultfd interface (include/uapi/linux/userfaultfd.h, amd64
// and arm64 alike).
const (
	uffdAPI            = 0xAA
	uffdUserModeOnly   = 1       // UFFD_USER_MODE_ONLY: allowed unprivileged
	uffdFeatureWPAsync = 1 << 15 // UFFD_FEATURE_WP_ASYNC
	uffdRegisterModeWP = 1 << 1  // UFFDIO_REGISTER_MODE_WP
	uffdioAPI          = 0xC018AA3F
	uffdioRegister     = 0xC020AA00
	uffdioUnregister   = 0x8010AA01
)

// singlePages is the userfaultfd every registered range of code shares.
// The first registration opens it and the last one's end closes it
// (closing it would register every range off).
var singlePages uffd

// uffd is a userfaultfd and the count of ranges registered with it.
type uffd struct {
	mu    sync.Mutex
	fd    int
	users int
}

// openUffd opens a userfaultfd, close-on-exec, for faults in user mode
// only (which an unprivileged process may ask for), with asynchronous
// write-protect faults.
func openUffd() (int, error) {
	fd, _, errno := syscall.Syscall(unix.SYS_USERFAULTFD, syscall.O_CLOEXEC|uffdUserModeOnly, 0, 0)
	if errno != 0 {
		return -1, fmt.Errorf("userfaultfd: %w", errno)
	}
	api := struct{ api, features, ioctls uint64 }{api: uffdAPI, features: uffdFeatureWPAsync}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, uffdioAPI, uintptr(unsafe.Pointer(&api))); errno != 0 {
		syscall.Close(int(fd))
		return -1, fmt.Errorf("userfaultfd with asynchronous write protection (Linux 6.7): %w", errno)
	}
	return int(fd), nil
}

// faultSingly makes a fault in code, a whole private mapping of a file,
// map the page it faulted on only, until faultWindows. It returns why not
// (an older kernel, or a sandbox that refuses the system call), and then
// leaves the mapping as it was: faults map whole windows.
func faultSingly(code []byte) error {
	s := &singlePages
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == 0 {
		fd, err := openUffd()
		if err != nil {
			return err
		}
		s.fd = fd
	}
	if err := s.ioctl(uffdioRegister, code); err != nil {
		if s.users == 0 {
			syscall.Close(s.fd)
		}
		return fmt.Errorf("registering %d bytes of code with the userfaultfd: %w", len(code), err)
	}
	s.users++
	return nil
}

// faultWindows undoes faultSingly: faults in code map whole windows again.
// The last range's end closes the userfaultfd.
func faultWindows(code []byte) {
	s := &singlePages
	s.mu.Lock()
	defer s.mu.Unlock()
	// It cannot fail for a range registered whole; if it did, the range
	// would stay registered until the userfaultfd closes.
	_ = s.ioctl(uffdioUnregister, code)
	if s.users--; s.users == 0 {
		syscall.Close(s.fd)
	}
}

// ioctl registers code with the userfaultfd, for write-protect faults,
// or registers it off: the range of its pages, whose last one the mapping
// fills, as the kernel requires.
func (s *uffd) ioctl(req uintptr, code []byte) error {
	page := syscall.Getpagesize()
	r := struct{ start, len, mode, ioctls uint64 }{
		start: uint64(uintptr(unsafe.Pointer(&code[0]))),
		len:   uint64((len(code) + page - 1) &^ (page - 1)),
		mode:  uffdRegisterModeWP, // read by UFFDIO_REGISTER only
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s.fd), req, uintptr(unsafe.Pointer(&r))); errno != 0 {
		return errno
	}
	return nil
}
