package wasmrt

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhist/wasmhist/host/internal/bulk"
)

// kernelModule is the import module of the Extism kernel.
const kernelModule = "extism:host/env"

// kernelAlign is the alignment of every kernel block. Blocks are rounded up
// to it, so an 8-byte load or store inside a block never leaves it, and a
// guest that pads its blocks to 8 bytes (the Go SDK does) writes only
// bytes it owns.
const kernelAlign = 8

// maxVarBytes bounds an instance's Extism variables, as go-sdk's default
// (1 MiB) does; they live as long as the instance.
const maxVarBytes = 1 << 20

// kernel is the Extism kernel of one instance, served in Go: the memory
// the kernel functions of SPEC section 2.1 hand out in blocks, the call's
// input, output and error, and the instance's variables.
//
// go-sdk runs the kernel as a WebAssembly module of its own, one instance
// per plugin instance, and forwards every kernel import to it through a
// Go function that looks the kernel up in the context and its export up by
// name (a fresh call engine, with its stack, each time). A guest moves its
// input and output 8 bytes per import call, so that forwarding was most of
// a call's fixed cost. Served here, an import is a bounds check and a load
// or store on a Go slice, the input is copied in once, and the output
// copied out once.
//
// Kernel memory is reset before every call and reused; it counts toward
// the instance's memory limit (an alloc past it returns 0 and is recorded
// as a refused growth, like a linear memory's).
type kernel struct {
	mem     []byte
	top     uint64  // end of the last block; [0, kernelAlign) is never handed out, so 0 is null
	blocks  []block // live blocks, ordered by offset
	limit   uint64
	tracker *memoryTracker

	input, inputLen   uint64
	output, outputLen uint64
	err               uint64

	vars     map[string][]byte
	varBytes int

	// capAddr and capLen are the buffer of direct capability calls in the
	// guest's memory (SPEC section 2.6), capLen 0 for none. They live as
	// long as the instance.
	capAddr, capLen uint32
}

type block struct{ off, n uint64 }

func newKernel(limit uint64, t *memoryTracker) *kernel {
	return &kernel{limit: limit, tracker: t, top: kernelAlign}
}

// reset frees every block and the input, output and error.
func (k *kernel) reset() {
	k.top = kernelAlign
	k.blocks = k.blocks[:0]
	k.input, k.inputLen, k.output, k.outputLen, k.err = 0, 0, 0, 0, 0
}

// alloc returns a zeroed block of n bytes, or 0 when kernel memory would
// pass the limit (or n is 0).
func (k *kernel) alloc(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	size := (n + kernelAlign - 1) &^ (kernelAlign - 1)
	if size < n || k.top+size < k.top || k.top+size > k.limit {
		k.tracker.refuse()
		return 0
	}
	end := k.top + size
	if end > uint64(len(k.mem)) {
		// Doubling amortises the copies; memory is kept across calls, so
		// after the first calls an instance no longer grows it.
		grown := make([]byte, min(max(end, 2*uint64(len(k.mem)), 64<<10), k.limit))
		bulk.Copy(grown, k.mem)
		k.mem = grown
	} else {
		// Blocks are reused across calls: no bytes of an earlier call show.
		bulk.Clear(k.mem[k.top:end])
	}
	off := k.top
	k.top = end
	k.blocks = append(k.blocks, block{off, n})
	return off
}

// find returns the index of the live block that starts at off.
func (k *kernel) find(off uint64) (int, bool) {
	return slices.BinarySearchFunc(k.blocks, off, func(b block, off uint64) int {
		switch {
		case b.off < off:
			return -1
		case b.off > off:
			return 1
		}
		return 0
	})
}

// length is the length of the block at off, 0 if no live block starts there.
func (k *kernel) length(off uint64) uint64 {
	if i, ok := k.find(off); ok {
		return k.blocks[i].n
	}
	return 0
}

// free releases the block at off. The last block's memory is reused by
// the next alloc; others only stop being blocks until the next reset.
func (k *kernel) free(off uint64) {
	i, ok := k.find(off)
	if !ok {
		return
	}
	if i == len(k.blocks)-1 {
		k.top = off
	}
	k.blocks = slices.Delete(k.blocks, i, i+1)
}

// bytes returns the n bytes at off, or panics (a trap) if they are not all
// in kernel memory handed out so far.
func (k *kernel) bytes(off, n uint64) []byte {
	if off > k.top || k.top-off < n {
		panic(errKernelBounds)
	}
	return k.mem[off : off+n : off+n]
}

var errKernelBounds = errors.New("kernel memory access out of bounds")

// block returns a copy of the whole block at off (nil if there is none).
func (k *kernel) blockCopy(off uint64) []byte {
	n := k.length(off)
	if n == 0 {
		return nil
	}
	return bulk.Clone(k.bytes(off, n))
}

// write copies b into a new block and returns its offset (0 if kernel
// memory is exhausted).
func (k *kernel) write(b []byte) uint64 {
	off := k.alloc(uint64(len(b)))
	if off != 0 {
		bulk.Copy(k.mem[off:], b)
	}
	return off
}

// setInput copies the call's input into a block of kernel memory, where
// input_load_* and, for plugin kits that read it as a block, input_offset
// and load_* find it. It reports false when it does not fit.
func (k *kernel) setInput(b []byte) bool {
	k.reset()
	if len(b) == 0 {
		return true
	}
	off := k.write(b)
	if off == 0 {
		return false
	}
	k.input, k.inputLen = off, uint64(len(b))
	return true
}

// outputBytes returns a copy of the output the guest set; false if the
// guest reset kernel memory after setting it. It runs outside the guest,
// so it must not panic.
func (k *kernel) outputBytes() ([]byte, bool) {
	if k.output > k.top || k.top-k.output < k.outputLen {
		return nil, false
	}
	return bulk.Clone(k.mem[k.output : k.output+k.outputLen]), true
}

// errorText is the message the guest gave error_set: the whole block ("" if
// none, or if the block was freed since).
func (k *kernel) errorText() string {
	n := k.length(k.err)
	if k.err == 0 || n == 0 {
		return ""
	}
	return string(k.mem[k.err : k.err+n])
}

// kernelKey is the context key under which a call carries its kernel.
type kernelKey struct{}

// callKernel is the kernel of the call in progress. Instance.Call puts it
// at the top of the context, so the lookup stops at the first node. A
// kernel function called when no call is in progress (from a module's
// start section) traps, as SPEC section 2.4 says.
func callKernel(ctx context.Context) *kernel {
	if k, ok := ctx.Value(kernelKey{}).(*kernel); ok {
		return k
	}
	panic(errors.New("kernel function called outside an export call"))
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// instantiateKernel defines the extism:host/env module in rt: every
// function of go-sdk v1.7.1's, with the same signatures (SPEC section 2.1).
func instantiateKernel(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(kernelModule)
	def := func(name string, params, results []api.ValueType, f func(k *kernel, stack []uint64)) {
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
			f(callKernel(ctx), stack)
		}), params, results).Export(name)
	}
	def("input_length", nil, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.inputLen })
	def("input_offset", nil, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.input })
	def("input_load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(k *kernel, s []uint64) {
		s[0] = binary.LittleEndian.Uint64(k.bytes(k.inputAt(s[0]), 8))
	})
	def("input_load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(k *kernel, s []uint64) {
		s[0] = uint64(k.bytes(k.inputAt(s[0]), 1)[0])
	})
	def("input_set", []api.ValueType{i64, i64}, nil, func(k *kernel, s []uint64) {
		k.bytes(s[0], s[1])
		k.input, k.inputLen = s[0], s[1]
	})
	def("alloc", []api.ValueType{i64}, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.alloc(s[0]) })
	def("free", []api.ValueType{i64}, nil, func(k *kernel, s []uint64) { k.free(s[0]) })
	def("length", []api.ValueType{i64}, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.length(s[0]) })
	def("length_unsafe", []api.ValueType{i64}, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.length(s[0]) })
	def("load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(k *kernel, s []uint64) {
		s[0] = binary.LittleEndian.Uint64(k.bytes(s[0], 8))
	})
	def("load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(k *kernel, s []uint64) {
		s[0] = uint64(k.bytes(s[0], 1)[0])
	})
	def("store_u64", []api.ValueType{i64, i64}, nil, func(k *kernel, s []uint64) {
		binary.LittleEndian.PutUint64(k.bytes(s[0], 8), s[1])
	})
	def("store_u8", []api.ValueType{i64, i32}, nil, func(k *kernel, s []uint64) {
		k.bytes(s[0], 1)[0] = byte(s[1])
	})
	def("output_set", []api.ValueType{i64, i64}, nil, func(k *kernel, s []uint64) {
		k.bytes(s[0], s[1])
		k.output, k.outputLen = s[0], s[1]
	})
	def("output_length", nil, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.outputLen })
	def("output_offset", nil, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.output })
	def("error_set", []api.ValueType{i64}, nil, func(k *kernel, s []uint64) { k.err = s[0] })
	def("error_get", nil, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.err })
	def("reset", nil, nil, func(k *kernel, _ []uint64) { k.reset() })
	def("memory_bytes", nil, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = uint64(len(k.mem)) })
	// The host sets no Extism config (SPEC section 2.1).
	def("config_get", []api.ValueType{i64}, []api.ValueType{i64}, func(_ *kernel, s []uint64) { s[0] = 0 })
	def("var_get", []api.ValueType{i64}, []api.ValueType{i64}, func(k *kernel, s []uint64) { s[0] = k.varGet(s[0]) })
	def("var_set", []api.ValueType{i64, i64}, nil, func(k *kernel, s []uint64) { k.varSet(s[0], s[1]) })
	def("http_request", []api.ValueType{i64, i64}, []api.ValueType{i64}, func(*kernel, []uint64) {
		panic(errors.New("http_request: no HTTP host is allowed"))
	})
	def("http_status_code", nil, []api.ValueType{i32}, func(_ *kernel, s []uint64) { s[0] = 0 })
	def("http_headers", nil, []api.ValueType{i64}, func(_ *kernel, s []uint64) { s[0] = 0 })
	// Plugin logs are discarded (RATIONALE: "Why are plugin logs
	// discarded?"): the level says so, and a message's block is freed.
	def("get_log_level", nil, []api.ValueType{i32}, func(_ *kernel, s []uint64) { s[0] = math.MaxInt32 })
	for _, name := range []string{"log_trace", "log_debug", "log_info", "log_warn", "log_error"} {
		def(name, []api.ValueType{i64}, nil, func(k *kernel, s []uint64) { k.free(s[0]) })
	}
	_, err := b.Instantiate(ctx)
	return err
}

// inputAt is the kernel offset of the input byte at off; out-of-range
// offsets make bytes trap.
func (k *kernel) inputAt(off uint64) uint64 {
	if off >= k.inputLen {
		panic(errKernelBounds)
	}
	return k.input + off
}

func (k *kernel) varGet(key uint64) uint64 {
	name := k.blockCopy(key)
	k.free(key)
	v, ok := k.vars[string(name)]
	if !ok {
		return 0
	}
	return k.write(v)
}

func (k *kernel) varSet(key, value uint64) {
	name := string(k.blockCopy(key))
	k.free(key)
	if old, ok := k.vars[name]; ok {
		k.varBytes -= len(name) + len(old)
		delete(k.vars, name)
	}
	if value == 0 {
		return
	}
	v := k.blockCopy(value)
	k.free(value)
	if k.varBytes+len(name)+len(v) > maxVarBytes {
		panic(errors.New("var_set: variable store is full"))
	}
	if k.vars == nil {
		k.vars = map[string][]byte{}
	}
	k.vars[name] = v
	k.varBytes += len(name) + len(v)
}
