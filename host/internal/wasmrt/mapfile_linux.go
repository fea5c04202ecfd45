//go:build linux

package wasmrt

import (
	"os"
	"syscall"
)

// mapFile returns the bytes of the file at path mapped read-only, and
// release, which unmaps them. A warm load reads the skeleton this way (1.4
// MB for the in-memory plugin): read into the heap, each of its pages was
// a fresh page faulted in and then copied to, about 350 minor faults; the
// page cache's pages are mapped instead, many to a fault. wazero copies
// whatever it keeps of a module it decodes (bodies, data, names), so
// nothing refers to the mapping once the compile returned. The file is
// the cache's, which replaces a file by renaming a new one over it and
// never writes one in place, so a mapped file does not shrink under the
// mapping (as for the machine code and the initial memory, mapped alike).
func mapFile(path string) (b []byte, release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() == 0 || fi.Size() != int64(int(fi.Size())) {
		b, err := os.ReadFile(path)
		return b, func() {}, err
	}
	b, err = syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { syscall.Munmap(b) }, nil
}
