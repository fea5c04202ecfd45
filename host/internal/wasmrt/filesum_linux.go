//go:build linux

package wasmrt

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// A load pins a plugin by the sha256 of its file: 3-4 ms of a warm `chat
// -m`'s CPU for the in-memory plugin's 2.7 MB. ReadFile keeps, in the
// cache, the sum of each plugin file it read with the file's stat identity
// (device, inode, size, modification and change times in nanoseconds),
// and trusts it while the file keeps that identity, the way git's index
// trusts the stat data of a file it hashed:
//
//   - a write to the file changes its change time, which no program can
//     set; a file written anew, or renamed over the old one, has another
//     inode;
//   - a sum is only recorded for a file whose change time is older than
//     the file system's clock when the read started, so a write in the
//     same clock tick, after the read, cannot keep the identity it was
//     recorded with ("racy clean");
//   - the file is read through one descriptor, its identity taken before
//     and after the read, so the bytes used are those the identity names;
//   - a sum is trusted only for a file no user but the process's (or
//     root) may write: another user's writes through a shared mapping of
//     the file change its bytes without always changing its times;
//   - a record is trusted only if the process's user owns it and no other
//     user may write it. Whoever may write the cache directory (0700) can
//     also write the machine code wazero runs from it unchecked: the
//     record gives no one a power they lacked.

// ReadFile reads the file at path and returns its bytes and their sha256,
// trusted from the cache's record of the file when the record holds.
func (c *Cache) ReadFile(path string) ([]byte, [32]byte, error) {
	clock := fsClock()
	f, err := os.Open(path)
	if err != nil {
		return nil, [32]byte{}, err
	}
	defer f.Close()
	before, err := statIdentity(f)
	if err != nil {
		return nil, [32]byte{}, err
	}
	b := make([]byte, before.id.size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, [32]byte{}, fmt.Errorf("reading %s: %w", path, err)
	}
	after, err := statIdentity(f)
	if err != nil {
		return nil, [32]byte{}, err
	}
	if before != after || !after.private {
		return b, sha256.Sum256(b), nil
	}
	record := c.sumPath(path)
	if sum, ok := readSum(record, after.id); ok {
		return b, sum, nil
	}
	sum := sha256.Sum256(b)
	if after.id.ctime < clock {
		writeAtomic(record, []byte(fmtSum(after.id, sum)))
	}
	return b, sum, nil
}

// StatSum returns the sum of the file at path from the cache's record of
// it, without reading the file: ok only while the file keeps the identity
// the record names, and no user but the process's (or root) may write it,
// as ReadFile trusts the record. A caller that later reads the bytes checks
// that they have this sum (the file may change in between).
func (c *Cache) StatSum(path string) (sum [32]byte, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return sum, false
	}
	defer f.Close()
	st, err := statIdentity(f)
	if err != nil || !st.private {
		return sum, false
	}
	return readSum(c.sumPath(path), st.id)
}

// fileState is a file's identity, and whether no user but the process's
// or root may write it.
type fileState struct {
	id      identity
	private bool
}

func statIdentity(f *os.File) (fileState, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fileState{}, &os.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fileState{}, fmt.Errorf("%s is not a regular file", f.Name())
	}
	return fileState{
		id: identity{
			dev: st.Dev, ino: st.Ino, size: st.Size,
			mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
			ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
		},
		private: (st.Uid == uint32(os.Geteuid()) || st.Uid == 0) && st.Mode&0o022 == 0,
	}, nil
}

// sumPath is where the cache records the sum of the file at path.
func (c *Cache) sumPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	h := sha256.Sum256([]byte(path))
	return filepath.Join(c.dir, "sums", hex.EncodeToString(h[:16]))
}

const sumFormat = "filesum v1 %d %d %d %d %d %x\n"

func fmtSum(id identity, sum [32]byte) string {
	return fmt.Sprintf(sumFormat, id.dev, id.ino, id.size, id.mtime, id.ctime, sum[:])
}

// readSum returns the sum the record at path holds for a file of identity
// id.
func readSum(path string, id identity) (sum [32]byte, ok bool) {
	b, err := readOwn(path)
	if err != nil {
		return sum, false
	}
	var rec identity
	var s []byte
	k, err := fmt.Sscanf(string(b), sumFormat, &rec.dev, &rec.ino, &rec.size, &rec.mtime, &rec.ctime, &s)
	if err != nil || k != 6 || rec != id || len(s) != len(sum) {
		return sum, false
	}
	copy(sum[:], s)
	return sum, true
}
