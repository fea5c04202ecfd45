package main

import (
	"github.com/wasmhist/wasmhist/host"
)

// dbGrants grants the sql capability on the database at path.
func dbGrants(cmd, path string) ([]host.Grant, error) {
	return nil, nil
}

// scratchGrants grants the sql capability on a temporary database, for
// commands that run a plugin without keeping what it stores.
func scratchGrants(cmd string) ([]host.Grant, func(), error) {
	return nil, func() {}, nil
}
