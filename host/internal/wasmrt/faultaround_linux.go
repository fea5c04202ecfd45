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
)

// singlePages is the userfaultfd that the mapped code of every open
// module registered with shares. The first registration opens it and the
// last module's close closes it (closing it registers every range off).
var singlePages struct {
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
// map the page it faulted on only, until releaseSingly. It returns why
// not (an older kernel, or a sandbox that refuses the system call), and
// then leaves the mapping as it was: faults map whole windows.
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
	page := syscall.Getpagesize()
	reg := struct{ start, len, mode, ioctls uint64 }{
		start: uint64(uintptr(unsafe.Pointer(&code[0]))),
		// The mapping ends at the end of a page; the range must too.
		len:  uint64((len(code) + page - 1) &^ (page - 1)),
		mode: uffdRegisterModeWP,
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s.fd), uffdioRegister, uintptr(unsafe.Pointer(&reg))); errno != 0 {
		if s.users == 0 {
			syscall.Close(s.fd)
		}
		return fmt.Errorf("registering %d bytes of code with the userfaultfd: %w", len(code), errno)
	}
	s.users++
	return nil
}

// releaseSingly gives back a registration faultSingly made, once no code
// runs from its mapping; the last one closes the userfaultfd.
func releaseSingly() {
	s := &singlePages
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users--; s.users == 0 {
		syscall.Close(s.fd)
	}
}
