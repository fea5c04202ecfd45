package wasmrt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
)

// A warm load spends most of its time in wazero decoding and validating
// every function body of the module before it looks up its compiled code
// (about 20 ms of a 33 ms load of the in-memory plugin), although a module
// whose code the cache holds needs none of its bodies: wazero keys the code
// by the module's sha256 and builds an instance from the other sections.
//
// So once a rewrite has compiled, the cache also keeps its skeleton: the
// rewrite with every function body replaced by `unreachable`, plus a custom
// section holding the rewrite's sha256 (so that two modules differing only
// in code never share a skeleton), and links the rewrite's compiled code
// under the skeleton's key in wazero's directory. A later load compiles the
// skeleton, which decodes and validates in a fraction of the time, and
// wazero finds the rewrite's machine code under the skeleton's key.
//
// The stubs must never run. If wazero does not find the code (the entry
// was removed, or is damaged and fails wazero's checksum), it compiles the
// stubs and writes them to the entry. So the load compiles on a cache of
// wazero's in memory whose file cache serves the one entry it found and
// nothing else, and writes nothing (codeFiles, codemapread_linux.go); it
// keeps the result only if wazero read that entry and would have written
// nothing, and gave the module the id the entry is named by. Where that
// cache cannot be set up (outside Linux, or a wazero whose internals
// differ), the load links the entry into a directory of its own, compiles
// there, and keeps the result only if the linked file is the one it
// linked, unchanged (same inode, same size): wazero replaces a file it
// writes (a temporary file renamed over it), and writes whenever it
// compiled. Otherwise the load goes the whole way.
//
// The skeleton relies on how wazero v1.9.0 names its cache entries and
// what it reads on a hit (engine_cache.go: fileCacheKey, getCompiledModule);
// TestSkeletonEntryNamesPinned names the version when an upgrade moves them.
// The directory is trusted as the code in it already is (rewrite.go).

// skeletonSection names the custom section that binds a skeleton to the
// rewrite it was made from.
const skeletonSection = "wasmhist.code-sha256"

// errNotWasm reports a module the skeleton cannot be made of.
var errNotWasm = errors.New("wasmrt: skeleton: malformed module")

// skeletonOf returns the skeleton of the rewritten module wasm.
func skeletonOf(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 {
		return nil, errNotWasm
	}
	out := append(make([]byte, 0, len(wasm)/2), wasm[:8]...)
	for i := 8; i < len(wasm); {
		id := wasm[i]
		size, j, ok := uleb32(wasm, i+1)
		if !ok || uint64(j)+uint64(size) > uint64(len(wasm)) {
			return nil, errNotWasm
		}
		end := j + int(size)
		if id == 10 { // the code section
			n, _, ok := uleb32(wasm, j)
			if !ok {
				return nil, errNotWasm
			}
			body := binary.AppendUvarint(nil, uint64(n))
			for range n {
				// size 3: no locals, unreachable, end
				body = append(body, 3, 0, 0x00, 0x0b)
			}
			out = append(out, 10)
			out = binary.AppendUvarint(out, uint64(len(body)))
			out = append(out, body...)
		} else {
			out = append(out, wasm[i:end]...)
		}
		i = end
	}
	sum := sha256.Sum256(wasm)
	custom := binary.AppendUvarint(nil, uint64(len(skeletonSection)))
	custom = append(custom, skeletonSection...)
	custom = append(custom, sum[:]...)
	out = append(out, 0)
	out = binary.AppendUvarint(out, uint64(len(custom)))
	return append(out, custom...), nil
}

// uleb32 reads an unsigned LEB128 of at most 32 bits at b[i:].
func uleb32(b []byte, i int) (v uint32, next int, ok bool) {
	for shift := 0; shift < 35; shift += 7 {
		if i >= len(b) {
			return 0, i, false
		}
		c := b[i]
		i++
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, i, true
		}
	}
	return 0, i, false
}

// codeID is the id wazero gives a module compiled without listeners and
// without its own preemption (wasm.Module.AssignModuleID).
func codeID(wasm []byte) [32]byte {
	h := sha256.New()
	h.Write(wasm)
	h.Write([]byte{0})
	var id [32]byte
	h.Sum(id[:0])
	return id
}

// entryName is the file name of the module's code in wazero's directory
// for the given CPU feature bits (wazevo.fileCacheKey).
func entryName(id [32]byte, cpu uint64) string {
	h := sha256.New()
	h.Write(id[:])
	h.Write([]byte("WAZEVO"))
	h.Write(binary.LittleEndian.AppendUint64(nil, cpu))
	return hex.EncodeToString(h.Sum(nil))
}

// cpuBits is how many low bits wazero's amd64 and arm64 CPU feature words
// use in entry names.
const cpuBits = 4

// codeDir is wazero's directory inside the cache, "" if there is not
// exactly one.
func (c *Cache) codeDir() string {
	m, _ := filepath.Glob(filepath.Join(c.dir, "wazero-*-"+runtime.GOARCH+"-"+runtime.GOOS))
	if len(m) != 1 {
		return ""
	}
	return m[0]
}

// entry finds the cache entry of the module whose id is id, trying each
// value of the CPU feature bits.
func entry(dir string, id [32]byte) (string, bool) {
	found := ""
	for cpu := range uint64(1 << cpuBits) {
		p := filepath.Join(dir, entryName(id, cpu))
		if _, err := os.Stat(p); err == nil {
			if found != "" {
				return "", false
			}
			found = p
		}
	}
	return found, found != ""
}

// compiledAs reports whether wazero compiled skel under id, the id its
// entry was found by.
func compiledAs(comp *compiled, skel []byte, id [32]byte) bool {
	got, ok := moduleID(comp.module)
	if !ok {
		got = codeID(skel)
	}
	return got == id
}

// skeletonPath is where the skeleton of the module whose sha256 is sum is
// kept, for this version of the rewrite.
func (c *Cache) skeletonPath(sum [32]byte) string {
	return filepath.Join(c.dir, "skeleton", fmt.Sprintf("%s-v%d.wasm", hex.EncodeToString(sum[:]), instrument.Version))
}

// keepSkeleton keeps the skeleton of rewritten, which compiled, and links
// its compiled code under the skeleton's entry. A failure only costs the
// next load the whole way.
func (c *Cache) keepSkeleton(sum [32]byte, rewritten []byte) {
	dir := c.codeDir()
	if dir == "" {
		return
	}
	full, ok := entry(dir, codeID(rewritten))
	if !ok {
		return
	}
	skel, err := skeletonOf(rewritten)
	if err != nil {
		return
	}
	cpuName := filepath.Base(full)
	var link string
	for cpu := range uint64(1 << cpuBits) {
		if entryName(codeID(rewritten), cpu) == cpuName {
			link = filepath.Join(dir, entryName(codeID(skel), cpu))
		}
	}
	if link == "" {
		return
	}
	// A link shares the file: no copy of the code, and no second file to
	// count against the cache's bound.
	tmp := fmt.Sprintf("%s.%d.skeleton.tmp", link, os.Getpid())
	os.Remove(tmp)
	linked := os.Link(full, tmp) == nil && os.Rename(tmp, link) == nil
	// Where link already names the same file (another load linked it),
	// the rename does nothing and leaves tmp.
	os.Remove(tmp)
	if !linked {
		return
	}
	// A load's own directory that a crash left behind holds only a link.
	if entries, err := os.ReadDir(c.dir); err == nil {
		for _, e := range entries {
			if info, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), ".skeleton-") && time.Since(info.ModTime()) > time.Hour {
				os.RemoveAll(filepath.Join(c.dir, e.Name()))
			}
		}
	}
	file := sealed(skel)
	if old, err := os.ReadFile(c.skeletonPath(sum)); err != nil || !bytes.Equal(old, file) {
		writeAtomic(c.skeletonPath(sum), file)
	}
}

// fromSkeleton compiles the kept skeleton of the module whose sha256 is
// sum, if the cache holds it and the rewrite's code under its entry; ok is
// false when the load must go the whole way.
func (c *Cache) fromSkeleton(ctx context.Context, funcs []capability.Func, sum [32]byte, pages uint32) (_ *compiled, ok bool) {
	f, release, err := mapFile(c.skeletonPath(sum))
	if err != nil {
		return nil, false
	}
	defer release()
	if len(f) <= crcSize {
		return nil, false
	}
	skel, crc, ok := unsealed(f)
	if !ok {
		return nil, false
	}
	dir := c.codeDir()
	if dir == "" {
		return nil, false
	}
	id := c.skeletonID(sum, skel, crc) // skeletonid.go
	shared, ok := entry(dir, id)
	if !ok {
		return nil, false
	}
	// wazero reads the entry, and only it, through the cache (codemapread_linux.go).
	mem := wazero.NewCompilationCache()
	if files := c.serveEntry(mem, shared); files != nil {
		comp, err := compileWith(ctx, mem, funcs, skel, pages, false, false)
		if err == nil && (!files.hit() || !compiledAs(comp, skel, id)) {
			// wazero compiled the stubs, or not under the entry's id:
			// never keep them.
			comp.Close(ctx)
			os.Remove(c.skeletonIDPath(sum))
			err = errNotWasm
		}
		if err != nil {
			mem.Close(ctx)
			return nil, false
		}
		comp.cache = mem
		comp.entry = files.entry()
		return comp, true
	}
	mem.Close(ctx)
	// A directory of this load's own, holding only the entry, linked.
	own, err := os.MkdirTemp(c.dir, ".skeleton-")
	if err != nil {
		return nil, false
	}
	defer os.RemoveAll(own)
	sub := filepath.Join(own, filepath.Base(dir))
	linked := filepath.Join(sub, filepath.Base(shared))
	if os.Mkdir(sub, 0o700) != nil || os.Link(shared, linked) != nil {
		return nil, false
	}
	before, err := os.Stat(linked)
	if err != nil {
		return nil, false
	}
	cc, err := wazero.NewCompilationCacheWithDir(own)
	if err != nil {
		return nil, false
	}
	comp, err := compileWith(ctx, cc, funcs, skel, pages, false, false)
	after, serr := os.Stat(linked)
	if err == nil && !compiledAs(comp, skel, id) {
		// Compiled under the id the link is named by, or not kept.
		os.Remove(c.skeletonIDPath(sum))
		serr = errNotWasm
	}
	if err != nil || serr != nil || !os.SameFile(before, after) || before.Size() != after.Size() {
		// wazero compiled the stubs: never keep them.
		if err == nil {
			comp.Close(ctx)
		}
		cc.Close(ctx)
		return nil, false
	}
	comp.cache = cc
	return comp, true
}
