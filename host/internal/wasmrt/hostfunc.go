package wasmrt

import (
	"context"
	"encoding/json"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
)

// capabilityResponse is what a capability host function writes back.
type capabilityResponse struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *abi.Error      `json:"error,omitempty"`
}

// instantiateCapabilities defines the capability host functions in rt, in
// the module abi.CapabilityModule. Each has the Extism host-function ABI:
// (i64 request offset) -> i64 response offset, both kernel blocks. It
// never panics on a plugin's account: every failure becomes an error
// response the plugin can read.
func instantiateCapabilities(ctx context.Context, rt wazero.Runtime, fs []capability.Func) error {
	if len(fs) == 0 {
		return nil
	}
	b := rt.NewHostModuleBuilder(abi.CapabilityModule)
	for _, f := range fs {
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
			k := callKernel(ctx)
			// 0 when kernel memory is exhausted: the null offset the
			// guest sees as "no response".
			stack[0] = k.writeResponse(serve(ctx, f, k, stack[0]))
		}), []api.ValueType{i64}, []api.ValueType{i64}).Export(f.Name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// encodeResponse writes the JSON json.Marshal writes of resp, but for its
// HTML escaping of <, > and & in a result's strings (the same strings once
// decoded). A result is the JSON a capability of the host built
// (capability.Func's contract: valid and compact), which json.Marshal
// would scan whole and copy again to compact it: a turn through the sqlite
// plugin passes its window of messages through here, and that scan was 3%
// of the turn's instructions.
func encodeResponse(resp capabilityResponse) []byte {
	if resp.Error == nil {
		if len(resp.Result) == 0 {
			return []byte(`{}`)
		}
		out := make([]byte, 0, len(`{"result":}`)+len(resp.Result))
		out = append(out, `{"result":`...)
		out = append(out, resp.Result...)
		return append(out, '}')
	}
	out, err := json.Marshal(resp)
	if err != nil {
		out, _ = json.Marshal(capabilityResponse{Error: abi.Errorf(abi.CodeInternal, "encode response: %v", err)})
	}
	return out
}

// writeResponse writes encodeResponse(resp) into a new kernel block and
// returns its offset (0 if kernel memory is exhausted). A result goes
// straight into the block, around the head and tail of its envelope: the
// response built apart first was a copy of the whole result, a sqlite
// turn's window among them, and 2.4 kB of a turn's allocation.
func (k *kernel) writeResponse(resp capabilityResponse) uint64 {
	if resp.Error != nil || len(resp.Result) == 0 {
		return k.write(encodeResponse(resp))
	}
	const head = `{"result":`
	n := uint64(len(head) + len(resp.Result) + 1)
	off := k.alloc(n)
	if off != 0 {
		b := k.mem[off : off+n]
		i := copy(b, head)
		i += copy(b[i:], resp.Result)
		b[i] = '}'
	}
	return off
}

func serve(ctx context.Context, f capability.Func, k *kernel, off uint64) capabilityResponse {
	req := k.blockCopy(off) // nil, as an empty request, if no block starts at off
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
