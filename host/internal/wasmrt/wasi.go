package wasmrt

import (
	"context"
	"crypto/rand"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// randomChunk is how many bytes random_get fills between two looks at the
// call's context.
const randomChunk = 64 << 10

// instantiateWASI defines WASI in rt: the runtime's own functions, but for
// random_get, which fills the buffer in chunks of randomChunk. The
// runtime's fills it in one call of the kernel's getrandom, which Go
// cannot preempt (a vDSO call): 32 MiB took 90 ms, for which a collection
// waited and the call's deadline passed unseen.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(randomGet), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("buf", "buf_len").Export("random_get")
	_, err := b.Instantiate(ctx)
	return err
}

// randomGet is WASI's random_get(buf, len) -> errno. A call whose context
// ended traps, as a guest's check of the interrupt flag does.
func randomGet(ctx context.Context, mod api.Module, stack []uint64) {
	buf, ok := mod.Memory().Read(uint32(stack[0]), uint32(stack[1]))
	if !ok {
		stack[0] = uint64(wasiEFAULT)
		return
	}
	for len(buf) > 0 {
		if err := ctx.Err(); err != nil {
			panic(err)
		}
		n := min(len(buf), randomChunk)
		rand.Read(buf[:n])
		buf = buf[n:]
	}
	stack[0] = 0
}

// wasiEFAULT is WASI's errno for an address out of bounds.
const wasiEFAULT = 21
