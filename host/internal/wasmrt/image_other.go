//go:build !linux

package wasmrt

// memImage is unused outside Linux: modules keep their data segments.
type memImage struct{ size int }

func (c *Cache) memoryImage(*compiled) {}

func (img *memImage) load([]byte, bool) bool { return false }

func (img *memImage) close() error { return nil }

func (img *memImage) mapped() uint64 { return 0 }

// dropZeroPages gives nothing back outside Linux, where the host does not
// map linear memory itself.
func dropZeroPages([]byte) int { return 0 }
