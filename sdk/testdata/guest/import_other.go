//go:build !wasip1

package main

// testEcho exists only so that the package also builds natively.
func testEcho(uint64) uint64 { panic("test_echo is a WebAssembly import") }
