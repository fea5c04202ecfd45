//go:build wasip1

package sdk

import (
	"context"

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

// run serves one export call: input from the kernel, dispatch, and either
// the output (return 0) or the JSON of an abi.Error through error_set
// (return 1).
func run(export string) int32 {
	out, aerr := dispatch(context.Background(), registered, export, readInput())
	if aerr != nil {
		kernelErrorSet(writeBlock(encodeError(aerr)))
		return 1
	}
	setOutput(out)
	return 0
}
