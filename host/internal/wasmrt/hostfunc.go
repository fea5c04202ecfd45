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
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			k := callKernel(ctx)
			var mem api.Memory
			if k.capLen > 0 {
				mem = mod.Memory()
			}
			resp := serve(ctx, f, k, mem, stack[0])
			if at, ok := k.writeDirect(mem, resp); ok {
				stack[0] = at
				return
			}
			// 0 when kernel memory is exhausted: the null offset the
			// guest sees as "no response".
			stack[0] = k.writeResponse(resp)
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

// directCall marks a request or response of a direct capability call (SPEC
// section 2.6): directCall | n is n bytes at the start of the guest's
// buffer. No kernel offset has the bit: kernel memory is bounded by the
// instance's memory limit.
const directCall = 1 << 63

// writeDirect writes resp into the guest's buffer of direct capability
// calls and returns directCall | its length; false if the guest has no
// buffer, resp does not fit, or the buffer is not in memory, and the
// response then goes into a kernel block.
func (k *kernel) writeDirect(mem api.Memory, resp capabilityResponse) (uint64, bool) {
	if mem == nil {
		return 0, false
	}
	const head = `{"result":`
	var n uint64
	if resp.Error == nil && len(resp.Result) > 0 {
		n = uint64(len(head) + len(resp.Result) + 1)
	} else {
		b := encodeResponse(resp)
		n = uint64(len(b))
		if n > uint64(k.capLen) {
			return 0, false
		}
		return directCall | n, mem.Write(k.capAddr, b)
	}
	if n > uint64(k.capLen) {
		return 0, false
	}
	// One copy, straight into the guest's memory, around the envelope.
	b, ok := mem.Read(k.capAddr, uint32(n))
	if !ok {
		return 0, false
	}
	i := copy(b, head)
	i += copy(b[i:], resp.Result)
	b[i] = '}'
	return directCall | n, true
}

// request returns a copy of the capability request at off: directCall | n
// for the first n bytes of the guest's buffer, else a kernel block (nil,
// as an empty request, if neither is there).
func (k *kernel) request(mem api.Memory, off uint64) []byte {
	if off&directCall == 0 || mem == nil {
		return k.blockCopy(off)
	}
	n := off &^ directCall
	if n > uint64(k.capLen) {
		return nil
	}
	b, ok := mem.Read(k.capAddr, uint32(n))
	if !ok {
		return nil
	}
	return append([]byte(nil), b...)
}

func serve(ctx context.Context, f capability.Func, k *kernel, mem api.Memory, off uint64) capabilityResponse {
	req := k.request(mem, off)
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
