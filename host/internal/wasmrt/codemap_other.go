//go:build !linux

package wasmrt

import "github.com/tetratelabs/wazero"

// mapCode leaves the code in wazero's mapping: outside Linux the host does
// not map memory itself.
func (c *Cache) mapCode(wazero.CompiledModule) int { return 0 }

// readThrough leaves cc's reads to wazero outside Linux.
func (c *Cache) readThrough(wazero.CompilationCache, string) bool { return false }
