//go:build !linux

package wasmrt

import "github.com/wasmhist/wasmhist/host/internal/loader"

// KeepSections keeps nothing: outside Linux every load reads the file
// (StatSum), and checks its sections.
func (c *Cache) KeepSections([32]byte, *loader.Sections) {}

// Sections reports no record.
func (c *Cache) Sections([32]byte) (*loader.Sections, bool) { return nil, false }
