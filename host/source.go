package host

import (
	"fmt"
	"os"
	"path/filepath"
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

func (s PluginSource) read() ([]byte, error) {
	if s.path == "" {
		if s.bytes == nil {
			return nil, fmt.Errorf("%w: empty plugin source", ErrInvalidConfig)
		}
		return s.bytes, nil
	}
	return os.ReadFile(s.path)
}
