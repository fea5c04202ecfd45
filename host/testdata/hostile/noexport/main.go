//go:build wasip1

// Command noexport is a v1 plugin that forgot the required store export.
package main

import "github.com/wasmhist/wasmhist/host/testdata/hostile/guest"

func main() {}

//go:wasmexport wasmhist_abi_v1
func marker() int32 { return 0 }

//go:wasmexport describe
func describe() int32 {
	return guest.Output([]byte(`{"name":"noexport","version":"0.1.0","abi":"1.0","state_version":1,"state_schema":{"type":"object"}}`))
}

//go:wasmexport provide
func provide() int32 { return guest.Output([]byte(`{}`)) }
