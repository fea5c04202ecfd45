//go:build !linux

package wasmrt

// memImage is unused outside Linux: modules keep their data segments.
type memImage struct{}

func (c *Cache) memoryImage(*compiled) {}

func (img *memImage) load([]byte, bool) bool { return false }

func (img *memImage) close() error { return nil }
