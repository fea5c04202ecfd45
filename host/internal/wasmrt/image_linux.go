//go:build linux

package wasmrt

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// memImage is a module's initial linear memory in a file of the cache
// (image.go), open for as long as the module is.
type memImage struct {
	f    *os.File
	size int
}

// imagePath is where the cache keeps the image img (its name: see
// fingerprint).
func (c *Cache) imagePath(img []byte) string {
	return filepath.Join(c.dir, "image", fingerprint(img)+".bin")
}

// memoryImage moves the active data segments of comp's module into an
// image in the cache, which it writes first if the cache does not hold it,
// and which every instance then maps (memImage.load). It leaves the module
// as it is when it cannot (dataImage), when the segments are small, or
// when the file cannot be written or does not hold the same bytes.
func (c *Cache) memoryImage(comp *compiled) {
	img, drop, ok := dataImage(comp.module)
	if !ok || len(img) < minImage {
		return
	}
	path := c.imagePath(img)
	f := openSame(path, img)
	if f == nil {
		if writePaged(path, img) != nil {
			return
		}
		if f = openSame(path, img); f == nil {
			return
		}
	}
	comp.image = &memImage{f: f, size: len(img)}
	drop()
}

// openSame opens the file at path if it holds exactly b. The file is kept
// open: a file renamed over it later does not change what the instances
// map.
func openSame(path string, b []byte) *os.File {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	if info, err := f.Stat(); err != nil || info.Size() != int64(len(b)) {
		f.Close()
		return nil
	}
	seen, err := syscall.Mmap(int(f.Fd()), 0, len(b), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		f.Close()
		return nil
	}
	same := bytes.Equal(seen, b)
	syscall.Munmap(seen)
	if !same {
		f.Close()
		return nil
	}
	return f
}

// load puts the image at the start of a new linear memory b: mapped
// copy-on-write over it when b is a mapping of the host's (reserve), or
// else read into it. It reports whether b holds the image.
func (img *memImage) load(b []byte, mapped bool) bool {
	if len(b) < img.size {
		return false
	}
	if mapped {
		n := (img.size + syscall.Getpagesize() - 1) &^ (syscall.Getpagesize() - 1)
		if n <= len(b) && mmapFixed(uintptr(unsafe.Pointer(&b[0])), n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE, int(img.f.Fd())) {
			return true
		}
		// A failed MAP_FIXED may have unmapped the pages: zeroed ones
		// back, as reserve mapped them.
		if !mmapFixed(uintptr(unsafe.Pointer(&b[0])), n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE, -1) {
			panic("wasmrt: linear memory unmapped and not restored")
		}
	}
	n, err := img.f.ReadAt(b[:img.size], 0)
	return err == nil && n == img.size
}

// mapped is how many bytes at the start of a memory the image's mapping
// covers: its size in whole pages.
func (img *memImage) mapped() uint64 {
	page := uint64(syscall.Getpagesize())
	return (uint64(img.size) + page - 1) &^ (page - 1)
}

// close closes the image's file; the instances' mappings stay valid.
func (img *memImage) close() error { return img.f.Close() }

// dropZeroPages gives back to the kernel each resident page of b that
// holds only zeros (madvise MADV_DONTNEED), and reports how many bytes it
// gave back. b must be part of a private anonymous mapping, starting at a
// page boundary: a page given back reads as zeros again, so what b holds
// does not change. Pages that are not resident are not read (mincore), so
// the scan costs what the guest wrote, not what it reserved.
func dropZeroPages(b []byte) int {
	page := syscall.Getpagesize()
	n := len(b) / page
	if n == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(page) != 0 {
		return 0
	}
	resident := make([]byte, n)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(n*page), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
		return 0
	}
	zero := make([]byte, page)
	dropped := 0
	// run is the start of the current run of zero pages, -1 if none.
	run := -1
	flush := func(end int) {
		if run >= 0 && syscall.Madvise(b[run*page:end*page], syscall.MADV_DONTNEED) == nil {
			dropped += (end - run) * page
		}
		run = -1
	}
	for i := range n {
		if resident[i]&1 != 0 && bytes.Equal(b[i*page:(i+1)*page], zero) {
			if run < 0 {
				run = i
			}
			continue
		}
		flush(i)
	}
	flush(n)
	return dropped
}
