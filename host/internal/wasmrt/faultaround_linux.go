//go:build linux

package wasmrt

import (
	"errors"
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

// Linux's userfaultfd interface (include/uapi/linux/userfaultfd.h; the
// numbers are the same on amd64 and arm64, though arm64 kernels gained
// write protection later).
const (
	uffdAPI            = 0xAA
	uffdUserModeOnly   = 1       // UFFD_USER_MODE_ONLY: allowed unprivileged
	uffdFeatureWPAsync = 1 << 15 // UFFD_FEATURE_WP_ASYNC
	uffdRegisterModeWP = 1 << 1  // UFFDIO_REGISTER_MODE_WP
	uffdioAPI          = 0xC018AA3F
	uffdioRegister     = 0xC020AA00
	uffdioUnregister   = 0x8010AA01
)

// singlePages is the userfaultfd of the process. Each module whose code
// registers with it holds it (hold) from its first registration to its
// close (let); the first holder opens it and the last one closes it,
// since closing it would register every range off.
var singlePages uffd

// uffd is a userfaultfd and the count of its holders.
type uffd struct {
	mu      sync.Mutex
	fd      int
	holders int
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
		return -1, fmt.Errorf("userfaultfd with asynchronous write protection (Linux 6.7 on amd64, later elsewhere): %w", errno)
	}
	return int(fd), nil
}

// hold takes the userfaultfd, opening it if no one holds it.
func (s *uffd) hold() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == 0 {
		fd, err := openUffd()
		if err != nil {
			return err
		}
		s.fd = fd
	}
	s.holders++
	return nil
}

// let gives back what hold took; the last holder closes the userfaultfd.
func (s *uffd) let() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders--; s.holders == 0 {
		syscall.Close(s.fd)
	}
}

// faultSingly makes a fault in code, a whole private mapping of a file,
// map the page it faulted on only, until faultWindows. The caller holds
// the userfaultfd. It returns why not, and then leaves the mapping as it
// was: faults map whole windows.
func (s *uffd) faultSingly(code []byte) error {
	if err := s.ioctl(uffdioRegister, code); err != nil {
		return fmt.Errorf("registering %d bytes of code with the userfaultfd: %w", len(code), err)
	}
	return nil
}

// faultWindows undoes faultSingly: faults in code map whole windows again.
// It cannot fail for a range registered whole; if it did, the range would
// stay registered, mapping single pages, until the userfaultfd closes.
func (s *uffd) faultWindows(code []byte) { _ = s.ioctl(uffdioUnregister, code) }

// ioctl registers code with the userfaultfd, for write-protect faults,
// or registers it off: the range of its pages, whose last one the mapping
// fills, as the kernel requires.
func (s *uffd) ioctl(req uintptr, code []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := struct{ start, len, mode, ioctls uint64 }{
		start: uint64(uintptr(unsafe.Pointer(&code[0]))),
		len:   wholePages(len(code)),
		mode:  uffdRegisterModeWP, // read by UFFDIO_REGISTER only
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s.fd), req, uintptr(unsafe.Pointer(&r))); errno != 0 {
		return errno
	}
	return nil
}

// lasting reports whether err, from hold or faultSingly, will come again
// for any code: the kernel lacks the feature or a sandbox refuses it
// (ENOSYS, EPERM, EINVAL, EOPNOTSUPP); not so for a process out of file
// descriptors or memory for the moment.
func lasting(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSYS, syscall.EPERM, syscall.EINVAL, syscall.EOPNOTSUPP} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
