//go:build !linux

package main

// fileIdentity has no identity to offer here: compileNote hashes the
// plugin file on every run, as it did before identities were kept.
func fileIdentity(string) (string, bool) { return "", false }
