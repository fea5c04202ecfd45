package host

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"

	"github.com/wasmhist/wasmhist/host/internal/wasmrt"
)

// PluginSource is where a plugin's WebAssembly bytes come from: File or
// Bytes.
type PluginSource struct {
	name  string
	path  string
	bytes []byte
}

// File reads a plugin from a .wasm file.
func File(path string) PluginSource {
	return PluginSource{name: filepath.Base(path), path: path}
}

// Bytes uses a plugin already in memory; name identifies it in errors and
// logs until its describe answer names it.
func Bytes(name string, wasm []byte) PluginSource {
	return PluginSource{name: name, bytes: wasm}
}

// String names the source.
func (s PluginSource) String() string { return s.name }

// sum returns the plugin's sha256 and, unless the cache's record of the
// file gives its sum without reading it (wasmrt.Cache.StatSum), its bytes.
// A warm load needs none of a file's bytes: the cache holds what it
// compiles and the result of the loader's checks of them, by the sum.
func (s PluginSource) sum(c *wasmrt.Cache) ([32]byte, []byte, error) {
	if s.path != "" {
		if sum, ok := c.StatSum(s.path); ok {
			return sum, nil, nil
		}
	}
	wasm, sum, err := s.read(c)
	return sum, wasm, err
}

// readSum returns the plugin's bytes, which must have the sha256 sum that
// the load checked: a file changed since fails with ErrChecksumMismatch.
// Its errors are sourceErrors.
func (s PluginSource) readSum(c *wasmrt.Cache, sum [32]byte) ([]byte, error) {
	wasm, got, err := s.read(c)
	if err != nil {
		return nil, sourceError{err}
	}
	if got != sum {
		return nil, sourceError{fmt.Errorf("%w: %s changed while it was loading (sha256 %x, now %x): load it again",
			ErrChecksumMismatch, s.path, sum[:6], got[:6])}
	}
	return wasm, nil
}

// sourceError is a failure to read a plugin's bytes, not the plugin's.
type sourceError struct{ err error }

func (e sourceError) Error() string { return e.err.Error() }
func (e sourceError) Unwrap() error { return e.err }

// read returns the plugin's bytes and their sha256. A file's sum comes
// from the compilation cache's record of it while the file is unchanged
// (wasmrt.Cache.ReadFile).
func (s PluginSource) read(c *wasmrt.Cache) ([]byte, [32]byte, error) {
	if s.path == "" {
		if s.bytes == nil {
			return nil, [32]byte{}, fmt.Errorf("%w: empty plugin source", ErrInvalidConfig)
		}
		return s.bytes, sha256.Sum256(s.bytes), nil
	}
	return c.ReadFile(s.path)
}
