package wasmrt

import "syscall"

// reserve maps n bytes of address space, rounded up to whole pages, that
// the kernel backs with zeroed pages only when they are first touched
// (MAP_NORESERVE: no swap is set aside, so reserving a 4 GiB maximum costs
// nothing until the guest uses it). Resident memory is thus what the guest
// touched, whatever its declared maximum. If the mapping fails it falls
// back to the Go heap; mapped reports which.
func reserve(n uint64) (b []byte, mapped bool) {
	n = (n + PageSize - 1) &^ (PageSize - 1)
	if n == 0 {
		return nil, false
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return make([]byte, n), false
	}
	return b, true
}

// release unmaps what reserve mapped.
func release(b []byte) {
	if len(b) == 0 {
		return
	}
	// A reservation that fell back to the heap is not a mapping; munmap
	// refuses it (EINVAL) and the garbage collector frees it.
	_ = syscall.Munmap(b)
}
