//go:build !linux

package wasmrt

import "github.com/tetratelabs/wazero"

// mapCode leaves the code in wazero's mapping: outside Linux the host does
// not map memory itself.
func (c *Cache) mapCode(wazero.CompiledModule, *entryCode) []byte { return nil }

// dropText has nothing to give back: the code is wazero's.
func (c *compiled) dropText() {}

// textFaults: outside Linux the host leaves faults to the kernel.
type textFaults struct{}

func (c *compiled) guestStarts()  {}
func (c *compiled) guestStarted() {}
func (c *compiled) releaseText()  {}

// codeFiles: outside Linux a load from the skeleton links the entry into
// a directory of its own (fromSkeleton).
type codeFiles struct{}

func (c *Cache) serveEntry(wazero.CompilationCache, string) *codeFiles { return nil }

func (*codeFiles) hit() bool { return false }

func (*codeFiles) entry() *entryCode { return nil }
