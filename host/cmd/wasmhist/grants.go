package main

import (
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
)

// dbGrants grants the sql capability on the database at path. The grant
// is lazy: the file is created by the first statement a plugin runs, so a
// plugin that does not use sql leaves no file behind.
func dbGrants(cmd, path string) ([]host.Grant, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, failf(cmd, "database path %s: %w", path, err)
	}
	return []host.Grant{sqlgrant.New(sqlgrant.Config{Path: abs})}, nil
}

// scratchGrants grants the sql capability on a database in a new temporary
// directory, for commands that run a plugin without keeping what it stores
// (inspect, conformance). cleanup removes the directory.
func scratchGrants(cmd string) (grants []host.Grant, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "wasmhist-scratch-")
	if err != nil {
		return nil, nil, failf(cmd, "creating a scratch database directory: %w: check that the temporary directory is writable", err)
	}
	return []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "scratch.db")})}, func() { os.RemoveAll(dir) }, nil
}
