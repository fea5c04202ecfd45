//go:build wasip1

package main

//go:wasmimport wasmhist:host/v1 test_echo
func testEcho(request uint64) uint64
