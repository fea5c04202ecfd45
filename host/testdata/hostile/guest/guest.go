//go:build wasip1

// Package guest is the least code a plugin needs to speak the Extism kernel
// ABI. The hostile test plugins use it instead of package sdk so that they
// stay small, fixed, and free to break every rule sdk enforces.
package guest

import "unsafe"

//go:wasmimport extism:host/env input_length
func inputLength() uint64

//go:wasmimport extism:host/env input_load_u64
func inputLoadU64(off uint64) uint64

//go:wasmimport extism:host/env input_load_u8
func inputLoadU8(off uint64) uint32

//go:wasmimport extism:host/env alloc
func alloc(n uint64) uint64

//go:wasmimport extism:host/env store_u64
func storeU64(off, v uint64)

//go:wasmimport extism:host/env store_u8
func storeU8(off uint64, v uint32)

//go:wasmimport extism:host/env output_set
func outputSet(off, n uint64)

//go:wasmimport extism:host/env error_set
func errorSet(off uint64)

// Input returns the call's input.
func Input() []byte {
	n := inputLength()
	b := make([]byte, n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Pointer(&b[i])) = inputLoadU64(i)
	}
	for ; i < n; i++ {
		b[i] = byte(inputLoadU8(i))
	}
	return b
}

//go:wasmimport extism:host/env length
func length(off uint64) uint64

//go:wasmimport extism:host/env load_u8
func loadU8(off uint64) uint32

// Read copies a kernel memory block.
func Read(off uint64) []byte {
	if off == 0 {
		return nil
	}
	n := length(off)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(loadU8(off + uint64(i)))
	}
	return b
}

// Write copies b into a new kernel memory block and returns its offset.
func Write(b []byte) uint64 { return write(b) }

func write(b []byte) uint64 {
	n := uint64(len(b))
	off := alloc(n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		storeU64(off+i, *(*uint64)(unsafe.Pointer(&b[i])))
	}
	for ; i < n; i++ {
		storeU8(off+i, uint32(b[i]))
	}
	return off
}

// Output sets the call's output and returns the success code.
func Output(b []byte) int32 {
	outputSet(write(b), uint64(len(b)))
	return 0
}

// Error sets the call's error (JSON of abi.Error or plain text) and returns
// the failure code.
func Error(msg string) int32 {
	errorSet(write([]byte(msg)))
	return 1
}
