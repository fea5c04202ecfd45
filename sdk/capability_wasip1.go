//go:build wasip1

package sdk

import "github.com/wasmhist/wasmhist/abi"

// The functions of the ABI's capabilities. The linker keeps an import only
// when it is reachable, so a plugin that never calls CallCapability does not
// import these and loads on hosts without the capabilities.

//go:wasmimport wasmhist:host/v1 sql
func importSQL(request uint64) (response uint64)

func builtinCapabilityFunc(name string) CapabilityFunc {
	switch name {
	case abi.SQLFunction:
		return importSQL
	}
	return nil
}

// callCapability passes request to a host capability function through
// kernel memory and returns its raw response. The guest owns both blocks and
// frees them, as the Extism convention for host functions has it.
func callCapability(fn CapabilityFunc, request []byte) ([]byte, error) {
	req := writeBlock(request)
	respOffset := fn(req)
	kernelFree(req)
	resp := readBlock(respOffset)
	kernelFree(respOffset)
	return resp, nil
}
