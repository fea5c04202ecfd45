package wasmrt

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// rewritten returns wasm (whose sha256 is sum) rewritten by package
// instrument, and the file that keeps it in the cache directory: a warm
// load reads it instead of decoding the whole code section again (about
// 10 ms for a Go plugin). The directory is trusted as its compiled code
// is; a file that does not start as a module is rewritten again.
func (c *Cache) rewritten(sum [32]byte, wasm []byte) ([]byte, string, error) {
	path := filepath.Join(c.dir, "rewritten", fmt.Sprintf("%s-v%d.wasm", hex.EncodeToString(sum[:]), instrument.Version))
	if b, err := os.ReadFile(path); err == nil && bytes.HasPrefix(b, wasmbin.Header) {
		return b, path, nil
	}
	b, err := instrument.Module(wasm)
	if err != nil {
		return nil, "", err
	}
	// A cache: a failure to keep the file only costs the next load time.
	_ = writeAtomic(path, b)
	return b, path, nil
}

// writeAtomic writes b to path through a temporary file renamed into place,
// so that a concurrent reader sees the whole file or none.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
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
