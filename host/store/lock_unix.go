//go:build unix

package store

import (
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on dir, which every File
// in it takes around its revision check and rename, so that writers in
// different processes cannot both pass the check. A lock on the directory
// leaves no file behind and survives the renames that replace the files.
func lockDir(dir string) (unlock func(), err error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		d.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
		d.Close()
	}, nil
}
