//go:build wasip1

package sdk

import (
	"encoding/binary"
)

// The Extism kernel imports this package uses (module extism:host/env).
// Pointers are i64 offsets into the kernel's memory, not the guest's, so
// every byte crosses through these functions; Go's wasmimport has no 8-bit
// type, so u8 values travel as uint32. Each call costs a host round trip,
// which is why data moves 8 bytes at a time and the 1-byte forms are used
// only where a length is not a multiple of 8.

//go:wasmimport extism:host/env input_length
func kernelInputLength() uint64

//go:wasmimport extism:host/env input_load_u64
func kernelInputLoadU64(offset uint64) uint64

//go:wasmimport extism:host/env input_load_u8
func kernelInputLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env alloc
func kernelAlloc(n uint64) uint64

//go:wasmimport extism:host/env free
func kernelFree(offset uint64)

//go:wasmimport extism:host/env length
func kernelLength(offset uint64) uint64

//go:wasmimport extism:host/env load_u64
func kernelLoadU64(offset uint64) uint64

//go:wasmimport extism:host/env load_u8
func kernelLoadU8(offset uint64) uint32

//go:wasmimport extism:host/env store_u64
func kernelStoreU64(offset uint64, v uint64)

//go:wasmimport extism:host/env output_set
func kernelOutputSet(offset, n uint64)

//go:wasmimport extism:host/env error_set
func kernelErrorSet(offset uint64)

// readInput copies the call's input out of kernel memory.
func readInput() []byte {
	n := kernelInputLength()
	buf := make([]byte, n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], kernelInputLoadU64(i))
	}
	// The tail goes byte by byte: reading 8 bytes past the input's end
	// could run past the end of kernel memory and trap.
	for ; i < n; i++ {
		buf[i] = byte(kernelInputLoadU8(i))
	}
	return buf
}

// readBlock copies a kernel memory block (such as a host function's result)
// into guest memory.
func readBlock(offset uint64) []byte {
	n := kernelLength(offset)
	buf := make([]byte, n)
	var i uint64
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], kernelLoadU64(offset+i))
	}
	for ; i < n; i++ {
		buf[i] = byte(kernelLoadU8(offset + i))
	}
	return buf
}

// writeBlock copies b into a new kernel memory block and returns its offset.
//
// The block is allocated rounded up to a multiple of 8 so that every byte,
// the tail included, is written with store_u64 (up to 7 host calls fewer).
// The padding is spaces: consumers that take a block's length from the
// kernel (error_set, capability requests) then read valid JSON followed by
// white space, which JSON allows; output_set is given the exact length.
func writeBlock(b []byte) uint64 {
	n := uint64(len(b))
	padded := (n + 7) &^ 7
	offset := kernelAlloc(padded)
	var i uint64
	for ; i+8 <= n; i += 8 {
		kernelStoreU64(offset+i, binary.LittleEndian.Uint64(b[i:]))
	}
	if i < n {
		var tail [8]byte
		copy(tail[:], b[i:])
		for j := n - i; j < 8; j++ {
			tail[j] = ' '
		}
		kernelStoreU64(offset+i, binary.LittleEndian.Uint64(tail[:]))
	}
	return offset
}

// setOutput makes b the call's output.
func setOutput(b []byte) {
	kernelOutputSet(writeBlock(b), uint64(len(b)))
}
