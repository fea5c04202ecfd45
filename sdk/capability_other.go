//go:build !wasip1

package sdk

import (
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
)

// callCapability has no host to reach outside WebAssembly: capability
// functions are imports of the plugin module.
func callCapability(CapabilityFunc, []byte) ([]byte, error) {
	return nil, fmt.Errorf("%w: host capabilities are reachable only from the WebAssembly build", abi.ErrUnimplemented)
}

// builtinCapabilityFunc has nothing to offer natively; callCapability would
// refuse it anyway, and a nil function says so earlier.
func builtinCapabilityFunc(string) CapabilityFunc { return nil }
