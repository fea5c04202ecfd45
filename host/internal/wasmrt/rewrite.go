package wasmrt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
)

// rewritten returns wasm (whose sha256 is sum) rewritten by package
// instrument, and the file that keeps it in the cache directory: a warm
// load reads it instead of decoding the whole code section again (about
// 10 ms for a Go plugin). kept reports that the bytes came from that file.
//
// The file ends with the sha256 of what precedes it, so that a file cut
// short by a crash, or damaged, is rewritten instead of compiled.
func (c *Cache) rewritten(sum [32]byte, wasm []byte) (b []byte, path string, kept bool, err error) {
	dir := filepath.Join(c.dir, "rewritten")
	name := hex.EncodeToString(sum[:])
	path = filepath.Join(dir, fmt.Sprintf("%s-v%d.wasm", name, instrument.Version))
	if f, err := os.ReadFile(path); err == nil && len(f) > sha256.Size {
		body, tail := f[:len(f)-sha256.Size], f[len(f)-sha256.Size:]
		if h := sha256.Sum256(body); bytes.Equal(h[:], tail) {
			return body, path, true, nil
		}
	}
	if b, err = instrument.Module(wasm); err != nil {
		return nil, "", false, err
	}
	h := sha256.Sum256(b)
	// A cache: a failure to keep the file only costs the next load time.
	if writeAtomic(path, append(b[:len(b):len(b)], h[:]...)) == nil {
		// Rewrites by earlier versions are of no further use.
		old, _ := filepath.Glob(filepath.Join(dir, name+"-v*.wasm"))
		for _, o := range old {
			if o != path {
				os.Remove(o)
			}
		}
	}
	return b, path, false, nil
}

// writeAtomic writes b to path through a temporary file, synced and then
// renamed into place, so that a concurrent reader sees the whole file or
// none, and a crash leaves the old file or the whole new one.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
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
