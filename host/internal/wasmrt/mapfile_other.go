//go:build !linux

package wasmrt

import "os"

// mapFile reads the file at path; release does nothing.
func mapFile(path string) (b []byte, release func(), err error) {
	b, err = os.ReadFile(path)
	return b, func() {}, err
}
