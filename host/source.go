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
