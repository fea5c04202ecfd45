//go:build wasip1

package sdk

import (
	"errors"

	"github.com/wasmhist/wasmhist/abi"
)

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

// directCall marks a request or response in the buffer of direct
// capability calls (SPEC section 2.6): directCall | n is its first n bytes.
const directCall = 1 << 63

// callCapability passes request to a host capability function and returns
// its raw response: through the buffer of direct capability calls when the
// host asked for one and the request fits, else through kernel memory. The
// guest owns both kernel blocks and frees them, as the Extism convention
// for host functions has it.
func callCapability(fn CapabilityFunc, request []byte) ([]byte, error) {
	var respOffset uint64
	if buf := capabilityBuffer; len(buf) > 0 && len(request) <= len(buf) {
		respOffset = fn(directCall | uint64(copy(buf, request)))
	} else {
		req := writeBlock(request)
		respOffset = fn(req)
		kernelFree(req)
	}
	return capabilityResponse(respOffset)
}

// capabilityResponse copies the response at respOffset out of the buffer of
// direct capability calls, which the next call overwrites, or out of its
// kernel block, which it frees.
func capabilityResponse(respOffset uint64) ([]byte, error) {
	if respOffset&directCall == 0 {
		resp := readBlock(respOffset)
		kernelFree(respOffset)
		return resp, nil
	}
	n := respOffset &^ directCall
	if n > uint64(len(capabilityBuffer)) {
		return nil, Wrap("sdk: capability response", abi.ErrInternal, errors.New("the host answered past the buffer of direct calls"))
	}
	return append([]byte(nil), capabilityBuffer[:n]...), nil
}
