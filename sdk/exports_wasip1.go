//go:build wasip1

package sdk

import (
	"context"
	"unsafe"

	"github.com/wasmhist/wasmhist/abi"
)

// The ABI's exports. Go allows //go:wasmexport outside package main, so
// importing this package is all it takes for a main package to become a
// plugin. Optional exports are always present and answer
// abi.CodeUnimplemented when the provider lacks the interface.

// The marker's name carries the ABI major, so a host can refuse another
// major from the export section alone. It returns 0, as SPEC section 3
// requires: an Extism host reads a non-zero result as a failed call, and
// from minor 1 on the minor would be one.
//
//go:wasmexport wasmhist_abi_v1
func exportMarker() int32 { return 0 }

//go:wasmexport describe
func exportDescribe() int32 { return run(abi.ExportDescribe) }

//go:wasmexport provide
func exportProvide() int32 { return run(abi.ExportProvide) }

//go:wasmexport store
func exportStore() int32 { return run(abi.ExportStore) }

//go:wasmexport list
func exportList() int32 { return run(abi.ExportList) }

//go:wasmexport clear
func exportClear() int32 { return run(abi.ExportClear) }

//go:wasmexport migrate_state
func exportMigrateState() int32 { return run(abi.ExportMigrateState) }

// The direct transport (SPEC section 2.5): a host that knows these two
// exports writes the input straight into a buffer of the plugin's memory
// and reads the output straight out of it, instead of the plugin moving
// both 8 bytes per kernel call. A host that does not know them never calls
// them, and every export then reads and writes through the kernel.
var (
	// directInput is the buffer the host filled for the next export call;
	// direct is set until that call takes it.
	directInput []byte
	direct      bool
	// directOutput is the last direct call's output, kept reachable until
	// the host has read it (the next call replaces it).
	directOutput []byte
)

// exportInputBuffer returns the address of a buffer of n bytes, into
// which the host writes the input of the export call it makes next: a new
// one, or for a Transient provider the last call's (see reuse.input).
//
//go:wasmexport wasmhist_input_buffer
func exportInputBuffer(n uint32) uint32 {
	directInput, direct, directOutput = kept.input(int(n)), true, nil
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(directInput))))
}

// exportOutput returns where the output of the direct call that just ended
// is in memory, as address<<32 | length; 0 if it answered through the
// kernel (an error, or a call that was not direct).
//
//go:wasmexport wasmhist_output
func exportOutput() uint64 {
	if len(directOutput) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(directOutput))))<<32 | uint64(len(directOutput))
}

// capabilityBufferSize is the size of the buffer of direct capability
// calls: a sqlite plugin's window of 50 messages of a few hundred bytes
// fits; a larger request or response goes through the kernel.
const capabilityBufferSize = 64 << 10

// capabilityBuffer is the buffer of direct capability calls (SPEC section
// 2.6), nil until the host asks for it: a host that does knows direct
// capability calls. It lives as long as the instance.
var capabilityBuffer []byte

// exportCapabilityBuffer returns the buffer of direct capability calls as
// address<<32 | length. A host that asks for it passes capability requests
// and responses through it when they fit, instead of the plugin moving
// them through the kernel 8 bytes per call.
//
//go:wasmexport wasmhist_capability_buffer
func exportCapabilityBuffer() uint64 {
	if capabilityBuffer == nil {
		capabilityBuffer = make([]byte, capabilityBufferSize)
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(capabilityBuffer))))<<32 | uint64(len(capabilityBuffer))
}

// run serves one export call: input from the host's buffer or the kernel,
// dispatch, and either the output (return 0) or the JSON of an abi.Error
// through error_set (return 1).
func run(export string) int32 {
	input, isDirect := directInput, direct
	directInput, direct, directOutput = nil, false, nil
	if !isDirect {
		input = readInput()
	}
	out, aerr := dispatch(context.Background(), registered, export, input, &kept)
	if out != nil && cap(out) <= maxSpare {
		kept.out = out[:0]
	}
	if aerr != nil {
		kernelErrorSet(writeBlock(encodeError(aerr)))
		return 1
	}
	if isDirect && len(out) > 0 {
		directOutput = out
		return 0
	}
	setOutput(out)
	return 0
}
