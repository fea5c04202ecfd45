//go:build linux

package main

import (
	"fmt"
	"syscall"
)

// fileIdentity is the stat identity of the regular file at path: device,
// inode, size, and modification and change times in nanoseconds. A write
// changes the change time, which no program can set, and a file written
// anew or renamed over the old one has another inode.
func fileIdentity(path string) (string, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", false
	}
	return fmt.Sprintf("%d %d %d %d %d", st.Dev, st.Ino, st.Size,
		st.Mtim.Sec*1e9+st.Mtim.Nsec, st.Ctim.Sec*1e9+st.Ctim.Nsec), true
}
