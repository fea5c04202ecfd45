//go:build linux

package wasmrt

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"
	"weak"

	"github.com/tetratelabs/wazero"
)

// minMappedCode is the least machine code worth a file: a module's code
// below it stays in wazero's mapping.
const minMappedCode = 256 << 10

// hugePage: wazero maps code whose size is a multiple of it with huge pages
// when it can, which a mapping of a file cannot replace page by page.
const hugePage = 2 << 20

// textPath is where the cache keeps a copy of the machine code b.
func (c *Cache) textPath(b []byte) string {
	return filepath.Join(c.dir, "text", fingerprint(b)+".bin")
}

// fingerprint names the bytes b in the cache: their length and a CRC-32C
// of sixteen samples of them. It only finds a file, cheaply (a checksum
// of the whole of a Go plugin's code cost a load 0.7-1.9 ms): what the
// file holds is compared with b, byte for byte, before it is mapped. Two
// builds with the same code (the skeleton's and the rewrite's, or two
// builds differing only in a custom section) share the file.
func fingerprint(b []byte) string {
	const samples, width = 16, 256
	sum := uint32(0)
	for i := range samples {
		at := (len(b) - width) * i / (samples - 1)
		at = max(at, 0)
		sum = crc32.Update(sum, castagnoli, b[at:min(at+width, len(b))])
	}
	return fmt.Sprintf("%d-%08x", len(b), sum)
}

// mapCode replaces wazero's anonymous copy of m's machine code with a
// private, read-only, executable mapping of the same bytes in the cache's
// text file, which it writes first if the cache does not hold it. It
// returns the code it mapped, nil when it left the code as it was (an
// interpreter's module, code too small, a wazero whose internals differ,
// or a file it could not write or that does not hold the same bytes).
// read, when set, is what the load that compiled m did with the code of
// the entry it read (entryCode); it counts only if it is m's code.
//
// It must run before anything runs the code. The file's bytes are
// compared with wazero's, which wazero checked against its own checksum,
// before the mapping replaces them; the cache directory is trusted as
// wazero's files beside it are: the file is only ever replaced whole
// (writeAtomic), never written in place. After a comparison of code the
// load read from an entry, it records the file for that entry
// (recordText), so that the next load maps the file as wazero reads the
// entry, without a comparison (codemapread_linux.go); code mapped so has
// nothing left to map here.
func (c *Cache) mapCode(m wazero.CompiledModule, read *entryCode) []byte {
	code, owner := executableOf(m)
	if len(code) < minMappedCode || len(code)%hugePage == 0 {
		return nil
	}
	if !read.of(code) {
		read = nil
	}
	// Code this load's wazero read, in a compilation cache of the load's
	// own, no other runtime has.
	if read == nil && !firstMapping(code, owner) {
		return nil
	}
	if c.mapExecutable(code, read) == 0 {
		return nil
	}
	return code
}

// dropText gives the resident pages of the module's mapped code back,
// once an instance's guest runtime has initialised: most of what a
// runtime's start runs, it never runs again (RATIONALE: "Why does an
// instance give back its module's code once its guest has started?").
// The mapping is private, of a file, read-only and executable: no page of
// it was ever written, so none is lost; a page runs again from the page
// cache after a minor fault. The instance that calls it keeps the module,
// so its mapping, open.
func (c *compiled) dropText() {
	if c.text != nil {
		syscall.Madvise(c.text, syscall.MADV_DONTNEED)
	}
}

// textFaults is how a fault in a module's mapped code maps pages: the
// page it faulted on alone (faultSingly), except while an instance's
// guest starts. A start runs much of the code once and gives it all back
// (dropText): there the kernel's window around each fault is the
// cheaper way in, for pages kept no longer (RATIONALE: "Why does a
// build's code fault in one page at a time?").
type textFaults struct {
	mu       sync.Mutex
	starting int
	// held: the module holds the userfaultfd (singlePages.hold); single:
	// the code is registered with it; refused: the kernel refused for
	// good (lasting), and windows stay; closed: the module closed, and
	// registers no more.
	held, single, refused, closed bool
	// testHold, when set, replaces singlePages.hold.
	testHold func() error
}

// guestStarts: an instance's guest runtime starts on the code; until it
// returns (guestStarted), faults map whole windows.
func (c *compiled) guestStarts() {
	f := &c.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.starting++; f.starting == 1 && f.single {
		singlePages.faultWindows(c.text)
		f.single = false
	}
}

// guestStarted: the start guestStarts announced has returned; once none
// runs, faults map single pages. Best effort: a kernel or sandbox that
// refuses leaves the windows.
func (c *compiled) guestStarted() {
	f := &c.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.starting--; f.starting > 0 || c.text == nil || f.single || f.refused || f.closed {
		return
	}
	if !f.held {
		hold := singlePages.hold
		if f.testHold != nil {
			hold = f.testHold
		}
		if err := hold(); err != nil {
			f.refused = lasting(err)
			return
		}
		f.held = true
	}
	err := singlePages.faultSingly(c.text)
	f.single, f.refused = err == nil, err != nil && lasting(err)
}

// releaseText gives back what the module's mapped code holds beside its
// mapping, once the module is closed.
func (c *compiled) releaseText() {
	f := &c.faults
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.single {
		singlePages.faultWindows(c.text)
		f.single = false
	}
	if f.held {
		singlePages.let()
		f.held = false
	}
}

// mapExecutable is mapCode for code seen for the first time; read, when
// set, is what the load did with the code of the entry it read (read.of
// holds for code).
func (c *Cache) mapExecutable(code []byte, read *entryCode) int {
	if read != nil && read.mapped {
		// Mapped from the text file as wazero read it; its checksum
		// touched every page: they leave the resident set, and stay in
		// the page cache.
		syscall.Madvise(code, syscall.MADV_DONTNEED)
		return len(code)
	}
	path := c.textPath(code)
	if id, ok := mapText(path, code); ok {
		recordText(read, path, id)
		return len(code)
	}
	if writePaged(path, code) != nil {
		return 0
	}
	id, ok := mapText(path, code)
	if !ok {
		return 0
	}
	recordText(read, path, id)
	return len(code)
}

// mapped records the code mapCode has seen, by address, with a weak
// pointer to wazero's structure that owns it: wazero hands the same code
// to every runtime on one compilation cache that compiles the same module,
// and code that may be running is never replaced. wazero unmaps code only
// once its owner is collected, and a weak pointer to a collected owner
// equals none made since, even of a new owner at the same heap address:
// code wazero maps at a reused address is new code. Collected owners
// leave the map as new code comes in.
var mapped = struct {
	sync.Mutex
	owners map[uintptr]weak.Pointer[byte]
}{owners: map[uintptr]weak.Pointer[byte]{}}

// firstMapping reports whether mapCode sees code, owned by owner, for the
// first time.
func firstMapping(code []byte, owner unsafe.Pointer) bool {
	if owner == nil {
		return false
	}
	at := uintptr(unsafe.Pointer(&code[0]))
	w := weak.Make((*byte)(owner))
	mapped.Lock()
	defer mapped.Unlock()
	if o, ok := mapped.owners[at]; ok && o == w {
		return false
	}
	for a, o := range mapped.owners {
		if o.Value() == nil {
			delete(mapped.owners, a)
		}
	}
	mapped.owners[at] = w
	return true
}

// mapText maps the file at path over code if it holds the same bytes, and
// returns the identity the file had before the comparison.
func mapText(path string, code []byte) (identity, bool) {
	f, err := os.Open(path)
	if err != nil {
		return identity{}, false
	}
	defer f.Close()
	id, ok := identityOf(f)
	if !ok || id.size != int64(len(code)) {
		return identity{}, false
	}
	fd := int(f.Fd())
	// Executable, so that a file system mounted noexec refuses here.
	seen, err := syscall.Mmap(fd, 0, len(code), syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE)
	if err != nil {
		return identity{}, false
	}
	// Unmapped, the compared pages leave the process's resident set; they
	// stay in the page cache for the mapping below.
	defer syscall.Munmap(seen)
	if !bytes.Equal(seen, code) {
		return identity{}, false
	}
	at := uintptr(unsafe.Pointer(&code[0]))
	if mmapFixed(at, len(code), syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE, fd) {
		return id, true
	}
	// A failed MAP_FIXED may have unmapped the code already: put an
	// anonymous copy back, as wazero had it.
	if !mmapFixed(at, len(code), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON, -1) {
		panic("wasmrt: machine code unmapped and not restored")
	}
	copy(code, seen)
	if syscall.Mprotect(code, syscall.PROT_READ|syscall.PROT_EXEC) != nil {
		panic("wasmrt: machine code restored but not executable")
	}
	return identity{}, false
}

// mmapFixed maps n bytes at address at, replacing what was mapped there.
func mmapFixed(at uintptr, n, prot, flags, fd int) bool {
	r, _, errno := syscall.Syscall6(syscall.SYS_MMAP, at, uintptr(n), uintptr(prot), uintptr(flags|syscall.MAP_FIXED), uintptr(fd), 0)
	return errno == 0 && r == at
}

// writePaged is writeAtomic writing one page at a time. A file written in
// one call is cached in large folios, and a fault in a mapping of it maps
// the whole folio: a guest touching one page in sixteen of its code had
// all of it resident. Written a page at a time, the cache holds single
// pages, and a fault maps the kernel's fault-around window (64 KiB) only.
// A file the kernel evicts and reads back comes in larger folios again;
// its pages are clean and shared, the first the kernel reclaims.
func writePaged(path string, b []byte) error {
	return writeChunked(path, b, syscall.Getpagesize())
}
