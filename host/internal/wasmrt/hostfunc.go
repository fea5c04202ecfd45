package wasmrt

import (
	"context"
	"encoding/json"

	extism "github.com/extism/go-sdk"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
)

// capabilityResponse is what a capability host function writes back.
type capabilityResponse struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *abi.Error      `json:"error,omitempty"`
}

// hostFunction adapts a capability.Func to the Extism host-function ABI:
// (i64 request offset) -> i64 response offset, both in kernel memory. It
// never panics on a plugin's account: every failure becomes an error
// response the plugin can read.
func hostFunction(f capability.Func) extism.HostFunction {
	hf := extism.NewHostFunctionWithStack(f.Name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		resp := serve(ctx, f, p, stack[0])
		b, err := json.Marshal(resp)
		if err != nil {
			b, _ = json.Marshal(capabilityResponse{Error: abi.Errorf(abi.CodeInternal, "encode response: %v", err)})
		}
		off, err := p.WriteBytes(b)
		if err != nil {
			// Kernel memory is exhausted; 0 is the null offset the guest
			// sees as "no response".
			off = 0
		}
		stack[0] = off
	}, []extism.ValueType{extism.ValueTypePTR}, []extism.ValueType{extism.ValueTypePTR})
	hf.SetNamespace(abi.CapabilityModule)
	return hf
}

func serve(ctx context.Context, f capability.Func, p *extism.CurrentPlugin, off uint64) capabilityResponse {
	req, err := p.ReadBytes(off)
	if err != nil {
		return capabilityResponse{Error: abi.Errorf(abi.CodeInvalidArgument, "%s: read request: %v", f.Name, err)}
	}
	call := capability.FromContext(ctx)
	if call == nil {
		return capabilityResponse{Error: abi.Errorf(abi.CodePermissionDenied, "%s: no capability call in progress", f.Name)}
	}
	if _, err := call.Session(ctx, f.Capability); err != nil {
		return capabilityResponse{Error: abi.AsError(err)}
	}
	out, err := f.Call(ctx, call, req)
	if err != nil {
		return capabilityResponse{Error: abi.AsError(err)}
	}
	return capabilityResponse{Result: out}
}
