//go:build linux

package wasmrt

import (
	"bytes"
	"encoding/hex"
	"fmt"
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
//
// The image is compared with the segments byte for byte, after which a
// record (image/<module id>.map) names the file by its stat identity, as
// the code's record does (codemapread_linux.go): a later load of the same
// module (wazero's id is a sha256 of its bytes, data segments included)
// opens the file the record names, unchanged, without laying the image out
// and comparing it (1.4 MB for the in-memory plugin).
func (c *Cache) memoryImage(comp *compiled) {
	size, build, drop, ok := dataLayout(comp.module)
	if !ok || size < minImage {
		return
	}
	id, known := moduleID(comp.module)
	if known {
		if f := recordedImage(c.imageRecordPath(id), size); f != nil {
			comp.image = &memImage{f: f, size: size}
			drop()
			return
		}
	}
	clock := fsClock()
	img := build()
	path := c.imagePath(img)
	f, fid := openSame(path, img)
	if f == nil {
		if writePaged(path, img) != nil {
			return
		}
		if f, fid = openSame(path, img); f == nil {
			return
		}
	}
	if known && fid.ctime < clock {
		writeAtomic(c.imageRecordPath(id), []byte(fmt.Sprintf(imageRecordFormat, filepath.Base(path), fid.dev, fid.ino, fid.size, fid.mtime, fid.ctime)))
	}
	comp.image = &memImage{f: f, size: len(img)}
	drop()
}

// imageRecordPath is where the cache records which file holds the image
// of the module whose wazero id is id.
func (c *Cache) imageRecordPath(id [32]byte) string {
	return filepath.Join(c.dir, "image", hex.EncodeToString(id[:])+".map")
}

const imageRecordFormat = "image v1 %s %d %d %d %d %d\n"

// recordedImage opens the image the record at path names, if it is a
// file of size bytes with the identity recorded.
func recordedImage(path string, size int) *os.File {
	b, err := readOwn(path)
	if err != nil {
		return nil
	}
	var name string
	var rec identity
	k, err := fmt.Sscanf(string(b), imageRecordFormat, &name, &rec.dev, &rec.ino, &rec.size, &rec.mtime, &rec.ctime)
	if err != nil || k != 6 || name != filepath.Base(name) || filepath.Ext(name) != ".bin" || rec.size != int64(size) {
		return nil
	}
	f, err := os.Open(filepath.Join(filepath.Dir(path), name))
	if err != nil {
		return nil
	}
	if id, ok := identityOf(f); !ok || id != rec {
		f.Close()
		return nil
	}
	return f
}

// openSame opens the file at path if it holds exactly b, and returns the
// identity it had before the comparison. The file is kept open: a file
// renamed over it later does not change what the instances map.
func openSame(path string, b []byte) (*os.File, identity) {
	f, err := os.Open(path)
	if err != nil {
		return nil, identity{}
	}
	id, ok := identityOf(f)
	if !ok || id.size != int64(len(b)) {
		f.Close()
		return nil, identity{}
	}
	seen, err := syscall.Mmap(int(f.Fd()), 0, len(b), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		f.Close()
		return nil, identity{}
	}
	same := bytes.Equal(seen, b)
	syscall.Munmap(seen)
	if !same {
		f.Close()
		return nil, identity{}
	}
	return f, id
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
func (img *memImage) mapped() uint64 { return wholePages(img.size) }

// wholePages is n bytes rounded up to whole pages: what a mapping of n
// bytes covers.
func wholePages(n int) uint64 {
	page := uint64(syscall.Getpagesize())
	return (uint64(n) + page - 1) &^ (page - 1)
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
