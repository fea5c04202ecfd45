//go:build wasip1

// Command wrongmajor is a plugin built for a future ABI major: its marker
// export names v2, so the host must refuse it before running any of it.
package main

import "github.com/wasmhist/wasmhist/host/testdata/hostile/guest"

func main() {}

//go:wasmexport wasmhist_abi_v2
func marker() int32 { return 0 }

//go:wasmexport describe
func describe() int32 {
	return guest.Output([]byte(`{"name":"wrongmajor","version":"0.1.0","abi":"2.0","state_version":1,"state_schema":{"type":"object"}}`))
}

//go:wasmexport provide
func provide() int32 { return guest.Output([]byte(`{}`)) }

//go:wasmexport store
func store() int32 { return guest.Output([]byte(`{}`)) }
