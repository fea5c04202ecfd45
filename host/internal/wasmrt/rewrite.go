package wasmrt

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
)

// The cache directory keeps each module rewritten by package instrument, so
// that a warm load reads it instead of decoding the whole code section
// again (about 10 ms for a Go plugin). A file holds the rewrite and then its
// CRC-32C, so that a file cut short by a crash, or damaged, is rewritten
// instead of compiled; it is kept only once the rewrite compiled. The
// directory is trusted as the compiled code beside it is, which the runtime
// checks with the same checksum (a sha256 here cost a warm load 1-2 ms).

// The checksum that ends a kept rewrite.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const crcSize = 4

// sealed returns b followed by its CRC-32C, as the cache's kept files and
// records end; b's spare capacity is not written.
func sealed(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b[:len(b):len(b)], crc32.Checksum(b, castagnoli))
}

// unsealed returns the body of f, bytes sealed wrote, and its CRC-32C,
// if the CRC holds.
func unsealed(f []byte) (body []byte, crc uint32, ok bool) {
	if len(f) < crcSize {
		return nil, 0, false
	}
	body, tail := f[:len(f)-crcSize], f[len(f)-crcSize:]
	crc = crc32.Checksum(body, castagnoli)
	return body, crc, crc == binary.BigEndian.Uint32(tail)
}

// rewritePath is where the rewrite of the module whose sha256 is sum is
// kept, for this version of the rewrite.
func (c *Cache) rewritePath(sum [32]byte) string {
	return filepath.Join(c.dir, "rewritten", fmt.Sprintf("%s-v%d.wasm", hex.EncodeToString(sum[:]), instrument.Version))
}

// kept returns the kept rewrite of the module whose sha256 is sum, if the
// cache holds a whole one.
func (c *Cache) kept(sum [32]byte) ([]byte, bool) {
	if f, err := os.ReadFile(c.rewritePath(sum)); err == nil && len(f) > crcSize {
		if body, _, ok := unsealed(f); ok {
			return body, true
		}
	}
	return nil, false
}

// keep stores a rewrite that compiled, and removes what earlier versions
// of the rewrite kept for the same module and temporary files a crash left.
// A failure only costs the next load the rewrite.
func (c *Cache) keep(sum [32]byte, b []byte) {
	path := c.rewritePath(sum)
	if writeAtomic(path, sealed(b)) != nil {
		return
	}
	dir, name := filepath.Dir(path), hex.EncodeToString(sum[:])+"-v"
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		n := f.Name()
		if v, ok := strings.CutPrefix(n, name); ok {
			// Only older versions: a newer host may share the directory.
			if k, err := strconv.Atoi(strings.TrimSuffix(v, ".wasm")); err == nil && k < instrument.Version {
				os.Remove(filepath.Join(dir, n))
			}
		} else if strings.HasPrefix(n, ".tmp-") {
			if info, err := f.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
				os.Remove(filepath.Join(dir, n))
			}
		}
	}
}

// drop removes the kept rewrite, which the runtime refused.
func (c *Cache) drop(sum [32]byte) { os.Remove(c.rewritePath(sum)) }

// writeAtomic writes b to path through a temporary file, synced and then
// renamed into place, so that a concurrent reader sees the whole file or
// none, and a crash leaves the old file or the whole new one.
func writeAtomic(path string, b []byte) error { return writeChunked(path, b, len(b)) }

// writeChunked is writeAtomic writing at most chunk bytes a call.
func writeChunked(path string, b []byte, chunk int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	for i := 0; i < len(b) && err == nil; i += chunk {
		_, err = f.Write(b[i:min(i+chunk, len(b))])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
