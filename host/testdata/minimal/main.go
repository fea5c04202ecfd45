//go:build wasip1

// Command minimal is the least Go plugin the host loads: the ABI's
// exports, answering describe with a constant manifest and provide and
// store with constant results, through the Extism kernel alone. It imports
// nothing of the sdk, so its module is the Go runtime and little else:
// the memory benchmarks measure with it what a build and an instance cost
// for the Go runtime alone (BenchmarkBuildRSS, BenchmarkInstanceRSS).
package main

//go:wasmimport extism:host/env alloc
func alloc(n uint64) uint64

//go:wasmimport extism:host/env store_u8
func storeU8(off uint64, b uint32)

//go:wasmimport extism:host/env output_set
func outputSet(off, n uint64)

const info = `{"name":"minimal","version":"1.0.0","abi":"1.0","state_version":1,` +
	`"state_schema":{"type":"object","required":["messages"],"properties":{"messages":{"type":"array","items":{"type":"object"}}}},` +
	`"initial_state":{"messages":[]},"config_schema":{"type":"object"},"capabilities":[],` +
	`"omit_state":["provide","store","clear"]}`

// output sets s as the call's output.
func output(s string) int32 {
	off := alloc(uint64(len(s)))
	for i := range len(s) {
		storeU8(off+uint64(i), uint32(s[i]))
	}
	outputSet(off, uint64(len(s)))
	return 0
}

//go:wasmexport wasmhist_abi_v1
func marker() int32 { return 0 }

//go:wasmexport describe
func describe() int32 { return output(info) }

//go:wasmexport provide
func provide() int32 { return output(`{"from_state":{"pointer":"/messages"}}`) }

//go:wasmexport store
func store() int32 { return output(`{}`) }

func main() {}
