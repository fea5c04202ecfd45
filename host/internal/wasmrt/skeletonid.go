package wasmrt

import (
	"encoding/binary"
	"os"
)

// A load from the skeleton names wazero's entry by the id wazero gives the
// skeleton (codeID: a sha256 of its 1.4 MB for the in-memory plugin, 1.2
// ms of a warm `chat -m`'s CPU, which wazero then computes again). So the
// cache keeps the id beside the skeleton, with the skeleton's length and
// CRC-32C, and the load uses it while they match. Nothing runs on its
// word: the load keeps the compiled skeleton only if wazero gave it that
// same id (moduleID), so that wazero looked up the linked entry and no
// other; a wrong id only costs the load the whole way.

// skeletonIDPath is where the id of the skeleton kept for sum is.
func (c *Cache) skeletonIDPath(sum [32]byte) string { return c.skeletonPath(sum) + ".id" }

// skeletonID returns the id of skel, whose CRC-32C is crc: the one kept
// beside it, or else computed, and then kept.
func (c *Cache) skeletonID(sum [32]byte, skel []byte, crc uint32) [32]byte {
	want := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(len(skel))), crc)
	path := c.skeletonIDPath(sum)
	if b, err := os.ReadFile(path); err == nil && len(b) == len(want)+32 && string(b[:len(want)]) == string(want) {
		return [32]byte(b[len(want):])
	}
	id := codeID(skel)
	writeAtomic(path, append(want, id[:]...))
	return id
}
