//go:build wasip1

// Command capcall forwards provide's input to the host function
// wasmhist:host/v1 echo and returns the host's response as its output, so
// tests can see exactly what a capability call answers.
package main

import "github.com/wasmhist/wasmhist/host/testdata/hostile/guest"

func main() {}

//go:wasmimport wasmhist:host/v1 echo
func echo(req uint64) uint64

//go:wasmexport wasmhist_abi_v1
func marker() int32 { return 0 }

//go:wasmexport describe
func describe() int32 {
	return guest.Output([]byte(`{"name":"capcall","version":"0.1.0","abi":"1.0","state_version":1,"state_schema":{"type":"object"},"capabilities":["echo"]}`))
}

//go:wasmexport provide
func provide() int32 {
	resp := echo(guest.Write(guest.Input()))
	return guest.Output(guest.Read(resp))
}

//go:wasmexport store
func store() int32 { return guest.Output([]byte(`{}`)) }
