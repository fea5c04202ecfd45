//go:build !linux

package wasmrt

// reserve allocates the whole reservation on the Go heap: outside Linux
// the host does not map memory itself. The Go runtime takes large
// allocations straight from the operating system, which backs pages as
// they are touched, so resident memory still follows what the guest uses.
func reserve(n uint64) ([]byte, bool) { return make([]byte, n), false }

func release([]byte) {}
