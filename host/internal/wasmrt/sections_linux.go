//go:build linux

package wasmrt

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/host/internal/loader"
)

// A warm load needs none of the plugin file's bytes: wazero compiles the
// kept skeleton, and the sum comes from the file's record (StatSum). What
// the load still read them for is the loader's checks of their sections
// (loader.ReadSections: every count against the bytes that hold it, the
// imports and exports), 2.7 MB read and walked, about 3 ms of a warm `chat
// -m`'s CPU for the in-memory plugin. Those checks depend on the bytes
// alone, so the cache keeps their result by the bytes' sha256: a module
// with that sum passed them, with these imports and exports. The host
// checks the imports and exports against the ABI and its capabilities on
// every load (loader.CheckSections), from the record as from the bytes.
//
// A record is trusted only if the process's user owns it, no other user
// may write it, it names the sum it is read for, and its CRC-32C holds.
// Whoever may write the cache directory (0700) can also write the machine
// code wazero runs from it: the record gives no one a power they lacked.

// sectionsMagic starts a record of a module's sections.
const sectionsMagic = "wasmhist sections\n"

// maxSectionsRecord bounds a record read back: names are short, and a
// plugin imports and exports a few dozen functions.
const maxSectionsRecord = 1 << 20

// sectionsPath is where the sections of the module whose sha256 is sum
// are recorded, for this version of the loader's checks.
func (c *Cache) sectionsPath(sum [32]byte) string {
	return filepath.Join(c.dir, "sections", fmt.Sprintf("%s-v%d", hex.EncodeToString(sum[:]), loader.SectionsVersion))
}

// KeepSections records that the module whose sha256 is sum passed
// loader.ReadSections with s. A failure only costs the next load the read.
func (c *Cache) KeepSections(sum [32]byte, s *loader.Sections) {
	b := append([]byte(sectionsMagic), sum[:]...)
	str := func(v string) { b = binary.AppendUvarint(b, uint64(len(v))); b = append(b, v...) }
	b = binary.AppendUvarint(b, uint64(len(s.Exports)))
	for _, e := range s.Exports {
		str(e)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Imports)))
	for _, im := range s.Imports {
		str(im.Module)
		str(im.Name)
		str(im.Kind)
	}
	writeAtomic(c.sectionsPath(sum), sealed(b))
}

// Sections returns what KeepSections recorded for the module whose sha256
// is sum, if the record holds.
func (c *Cache) Sections(sum [32]byte) (*loader.Sections, bool) {
	f, err := os.Open(c.sectionsPath(sum))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if _, ok := identityOf(f); !ok {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSectionsRecord+1))
	if err != nil || len(b) > maxSectionsRecord || len(b) < len(sectionsMagic)+len(sum)+crcSize {
		return nil, false
	}
	body, _, ok := unsealed(b)
	if !ok || string(body[:len(sectionsMagic)]) != sectionsMagic || string(body[len(sectionsMagic):][:len(sum)]) != string(sum[:]) {
		return nil, false
	}
	r := recordReader{b: body[len(sectionsMagic)+len(sum):]}
	var s loader.Sections
	for range r.count() {
		s.Exports = append(s.Exports, r.str())
	}
	for range r.count() {
		s.Imports = append(s.Imports, loader.Import{Module: r.str(), Name: r.str(), Kind: r.str()})
	}
	if r.bad || len(r.b) != 0 {
		return nil, false
	}
	return &s, true
}

// recordReader reads a record's counts and strings; bad sticks.
type recordReader struct {
	b   []byte
	bad bool
}

// count reads a count, which cannot exceed the bytes left (every entry
// takes one at least).
func (r *recordReader) count() uint64 {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.bad = true
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *recordReader) str() string {
	n, k := binary.Uvarint(r.b)
	if r.bad || k <= 0 || n > uint64(len(r.b)-k) {
		r.bad = true
		return ""
	}
	s := string(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return s
}
