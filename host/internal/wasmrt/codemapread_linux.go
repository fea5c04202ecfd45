//go:build linux

package wasmrt

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"unsafe"

	"github.com/tetratelabs/wazero"
)

// A warm load reads the module's machine code from wazero's cache entry:
// wazero v1.9.0 reads the whole of it (11.3 MB for the in-memory plugin)
// into fresh anonymous pages, and mapCode then compares it byte for byte
// with the cache's page-aligned copy ("text") before mapping that copy over
// it: 8 and 3.5 ms of a `chat -m`'s CPU. So a load from the skeleton
// (fromSkeleton) has wazero read the entry it found through codeFiles: the
// bytes before the code in one read, and the code itself, when a record in
// the cache says which text file holds it, mapped from that file instead
// of read. Serving that one entry from the shared directory, it needs no
// directory of its own, no link and no removal (1 ms of a `chat -m`: ext4
// allocates an inode for each directory).
//
// The record (text/<entry>.map) is written by mapCode after it compared
// the text file with the code wazero read from the entry, byte for byte.
// It names the text file by its stat identity (device, inode, size,
// modification and change times in nanoseconds) and the code by its length
// and the CRC-32C the entry stores: a text file written again, replaced or
// changed in place (which changes its change time, which no program can set)
// is no longer the file the record names, and a rebuilt entry whose code
// differs stores another checksum. wazero still checks the mapped bytes
// against the entry's checksum, as it checks what it reads. A record is
// only written for a text file whose change time is older than the clock
// the comparison started at (the file system's coarse clock), so that no
// change in the same clock tick as the comparison can go unseen (git's
// "racy clean" rule for its index). Records and text files are trusted
// only when the process's user owns them and no other user may write them,
// as wazero's entries, whose machine code wazero runs unchecked, are
// trusted in the same directory.

// codeFiles is wazero's filecache.Cache for one load from a skeleton: it
// serves the one entry the load found (path, named name), and nothing
// else; what wazero would write or delete, it only notes (wrote), so that
// the load keeps the module only if wazero compiled nothing. The method set
// is wazero v1.9.0's internal filecache.Cache (its Key is an alias of
// [32]byte).
type codeFiles struct {
	c          *Cache
	path, name string

	mu     sync.Mutex
	served bool // Get served the entry
	wrote  bool // wazero compiled the module (Add) or found the entry stale (Delete)
	code   *entryCode
}

// serveEntry makes cc, a compilation cache of wazero's in memory, read
// its entries through a codeFiles serving only the entry at path. It
// returns nil, and leaves cc as it is, for a wazero whose internals
// differ; it must run before cc compiles anything.
func (c *Cache) serveEntry(cc wazero.CompilationCache, path string) *codeFiles {
	v := reflect.ValueOf(cc)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("fileCache")
	if !f.IsValid() || f.Kind() != reflect.Interface {
		return nil
	}
	cf := &codeFiles{c: c, path: path, name: filepath.Base(path)}
	if !reflect.TypeOf(cf).Implements(f.Type()) {
		return nil
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(cf))
	return cf
}

func (cf *codeFiles) Add([32]byte, io.Reader) error { cf.note(false); return nil }
func (cf *codeFiles) Delete([32]byte) error         { cf.note(false); return nil }

func (cf *codeFiles) note(served bool) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if served {
		cf.served = true
	} else {
		cf.wrote = true
	}
}

// hit reports whether wazero took the module's code from the entry and
// compiled nothing.
func (cf *codeFiles) hit() bool {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	return cf.served && !cf.wrote
}

// entry is what the load did with the entry's code, nil if it read none.
func (cf *codeFiles) entry() *entryCode {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	return cf.code
}

func (cf *codeFiles) noteCode(e entryCode) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	cf.code = &e
}

// Get opens the entry if key names it: the bytes before the code are read
// at once, the code mapped from its text file when a record proves it
// holds the same bytes, read otherwise.
func (cf *codeFiles) Get(key [32]byte) (io.ReadCloser, bool, error) {
	name := hex.EncodeToString(key[:])
	if name != cf.name {
		return nil, false, nil
	}
	f, err := os.Open(cf.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	cf.note(true)
	r, err := newEntryReader(f)
	if err != nil {
		// Not an entry this reader knows: wazero reads it, and says why
		// it is not one.
		f.Seek(0, io.SeekStart)
		return f, true, nil
	}
	r.cf = cf
	r.record = cf.c.recordPath(name)
	r.clock = fsClock()
	return r, true, nil
}

// entryReader serves an entry of wazero's cache, whose layout is (wazevo
// engine_cache.go): "WAZEVO", the version's length and the version, the
// number of functions (4 bytes) and each one's offset (8 bytes), the
// code's length (8 bytes), the code, its CRC-32C (4 bytes) and a source
// map.
type entryReader struct {
	cf     *codeFiles
	f      *os.File
	size   int64
	pre    []byte // the bytes before the code
	n      int    // the code's length
	sum    uint32 // the code's CRC-32C, as the entry stores it
	pos    int64
	record string
	clock  int64
}

func newEntryReader(f *os.File) (*entryReader, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	r := &entryReader{f: f, size: info.Size()}
	head := make([]byte, min(r.size, 64<<10))
	if _, err := f.ReadAt(head, 0); err != nil {
		return nil, err
	}
	if len(head) < 8 || string(head[:6]) != "WAZEVO" {
		return nil, errors.New("not a wazero entry")
	}
	at := 7 + int64(head[6])
	if at+4 > int64(len(head)) {
		return nil, errors.New("short entry")
	}
	funcs := int64(binary.LittleEndian.Uint32(head[at:]))
	codeAt := at + 4 + 8*funcs + 8
	if codeAt > r.size {
		return nil, errors.New("short entry")
	}
	if codeAt > int64(len(head)) {
		head = make([]byte, codeAt)
		if _, err := f.ReadAt(head, 0); err != nil {
			return nil, err
		}
	}
	r.pre = head[:codeAt]
	n := binary.LittleEndian.Uint64(r.pre[codeAt-8:])
	if n > uint64(r.size-codeAt-4) {
		return nil, errors.New("short entry")
	}
	r.n = int(n)
	var sum [4]byte
	if _, err := f.ReadAt(sum[:], codeAt+int64(n)); err != nil {
		return nil, err
	}
	r.sum = binary.LittleEndian.Uint32(sum[:])
	return r, nil
}

func (r *entryReader) Close() error { return r.f.Close() }

func (r *entryReader) Read(p []byte) (int, error) {
	if r.pos < int64(len(r.pre)) {
		n := copy(p, r.pre[r.pos:])
		r.pos += int64(n)
		return n, nil
	}
	if r.pos == int64(len(r.pre)) && len(p) == r.n && r.n > 0 {
		// wazero reads the code into its fresh mapping in one call.
		at := uintptr(unsafe.Pointer(&p[0]))
		if r.mapCode(p) {
			r.pos += int64(r.n)
			r.cf.noteCode(entryCode{at: at, n: r.n, mapped: true})
			return r.n, nil
		}
		n, err := r.f.ReadAt(p, r.pos)
		r.pos += int64(n)
		if err == nil {
			r.cf.noteCode(entryCode{at: at, n: r.n, record: r.record, sum: r.sum, clock: r.clock})
		}
		return n, err
	}
	if r.pos >= r.size {
		return 0, io.EOF
	}
	n, err := r.f.ReadAt(p, r.pos)
	r.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// mapCode maps the text file the record names over code, wazero's fresh
// mapping for it, if the record holds for it and for the entry.
func (r *entryReader) mapCode(code []byte) bool {
	if len(code) < minMappedCode || len(code)%hugePage == 0 || uintptr(unsafe.Pointer(&code[0]))%uintptr(os.Getpagesize()) != 0 {
		return false
	}
	rec, ok := readRecord(r.record)
	if !ok || rec.n != r.n || rec.sum != r.sum {
		return false
	}
	text, err := os.Open(filepath.Join(filepath.Dir(r.record), rec.text))
	if err != nil {
		return false
	}
	defer text.Close()
	id, ok := identityOf(text)
	if !ok || id != rec.id {
		return false
	}
	at := uintptr(unsafe.Pointer(&code[0]))
	if mmapFixed(at, len(code), syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE, int(text.Fd())) {
		return true
	}
	// A failed MAP_FIXED may have unmapped wazero's pages: map fresh ones
	// as wazero had them (amd64: read, write, execute), for the read.
	if !mmapFixed(at, len(code), syscall.PROT_READ|syscall.PROT_WRITE|syscall.PROT_EXEC, syscall.MAP_PRIVATE|syscall.MAP_ANON, -1) {
		panic("wasmrt: machine code unmapped and not restored")
	}
	return false
}

// identity is what a file's stat says of its bytes: any write to the file
// changes its change time, and a file written anew has another inode.
type identity struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

// identityOf returns f's identity, false unless the process's user owns
// it, it is a regular file, and no other user may write it.
func identityOf(f *os.File) (identity, bool) {
	var st syscall.Stat_t
	if syscall.Fstat(int(f.Fd()), &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG ||
		st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
		return identity{}, false
	}
	return identity{
		dev: st.Dev, ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
	}, true
}

// fsClock is the clock the file system stamps files with (Linux: the
// coarse real-time clock), in nanoseconds.
var fsClock = func() int64 {
	const clockRealtimeCoarse = 5
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockRealtimeCoarse, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return ts.Nano()
}

// codeRecord says that the text file named text, while its identity is
// id, holds the n bytes of code whose CRC-32C is sum.
type codeRecord struct {
	text string
	id   identity
	n    int
	sum  uint32
}

// recordPath is where the cache records which text file holds the code of
// wazero's entry name.
func (c *Cache) recordPath(entry string) string {
	return filepath.Join(c.dir, "text", entry+".map")
}

const recordFormat = "codemap v1 %s %d %d %d %d %d %d %d\n"

// readOwn reads the small file at path (a record), if the process's user
// owns it and no other user may write it.
func readOwn(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, ok := identityOf(f); !ok {
		return nil, fmt.Errorf("%s: not the cache's own file", path)
	}
	var b [256]byte
	n, _ := io.ReadFull(f, b[:])
	return b[:n], nil
}

func readRecord(path string) (codeRecord, bool) {
	b, err := readOwn(path)
	if err != nil {
		return codeRecord{}, false
	}
	var rec codeRecord
	k, err := fmt.Sscanf(string(b), recordFormat, &rec.text, &rec.id.dev, &rec.id.ino, &rec.id.size, &rec.id.mtime, &rec.id.ctime, &rec.n, &rec.sum)
	if err != nil || k != 8 || rec.text != filepath.Base(rec.text) || filepath.Ext(rec.text) != ".bin" {
		return codeRecord{}, false
	}
	return rec, true
}

// recordText writes the record of the code read from an entry (read),
// just compared with the text file whose identity is id, if the text file
// did not change in the tick the reading started in.
func recordText(read *entryCode, text string, id identity) {
	if read == nil || read.mapped || id.ctime >= read.clock || read.clock == 0 {
		return
	}
	writeAtomic(read.record, []byte(fmtRecord(filepath.Base(text), id, read.n, read.sum)))
}

// fmtRecord is the record of the text file named text.
func fmtRecord(text string, id identity, n int, sum uint32) string {
	return fmt.Sprintf(recordFormat, text, id.dev, id.ino, id.size, id.mtime, id.ctime, n, sum)
}
