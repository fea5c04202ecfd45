//go:build wasip1

// Command capdirect forwards provide's input to the host function
// wasmhist:host/v1 echo as a direct capability call (SPEC section 2.6), and
// answers {"direct": whether the response came back in its buffer,
// "response": the response}. Its buffer is 64 bytes; a larger request goes
// through the kernel. On an instance's first call the input chooses the
// buffer the host is given: "outside" names one past the end of memory,
// and the guest then still passes its requests as direct ones; "loop"
// never answers.
package main

import (
	"unsafe"

	"github.com/wasmhist/wasmhist/host/testdata/hostile/guest"
)

func main() {}

//go:wasmimport wasmhist:host/v1 echo
func echo(req uint64) uint64

//go:wasmexport wasmhist_abi_v1
func marker() int32 { return 0 }

//go:wasmexport describe
func describe() int32 {
	return guest.Output([]byte(`{"name":"capdirect","version":"0.1.0","abi":"1.0","state_version":1,"state_schema":{"type":"object"},"capabilities":["echo"]}`))
}

// The direct transport's exports, which a host asks for before it asks for
// the buffer of direct capability calls; the output goes through the
// kernel.
var input []byte

//go:wasmexport wasmhist_input_buffer
func inputBuffer(n uint32) uint32 {
	input = make([]byte, n)
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(input))))
}

//go:wasmexport wasmhist_output
func output() uint64 { return 0 }

const directCall = 1 << 63

var (
	buf     []byte
	outside bool
	spin    int
)

//go:wasmexport wasmhist_capability_buffer
func capabilityBuffer() uint64 {
	buf = make([]byte, 64)
	switch string(guest.Input()) {
	case `"loop"`:
		for {
			spin++
		}
	case `"outside"`:
		outside = true
		return 0xffff_fff0<<32 | 64
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))<<32 | uint64(len(buf))
}

//go:wasmexport provide
func provide() int32 {
	req := guest.Input()
	var resp uint64
	if len(req) <= len(buf) {
		resp = echo(directCall | uint64(copy(buf, req)))
	} else if outside {
		resp = echo(directCall | uint64(len(req)))
	} else {
		resp = echo(guest.Write(req))
	}
	direct := resp&directCall != 0
	var body []byte
	if direct {
		n := resp &^ directCall
		if n > uint64(len(buf)) {
			return guest.Error("the host answered past the buffer")
		}
		body = buf[:n]
	} else {
		body = guest.Read(resp)
	}
	out := `{"direct":false,"response":`
	if direct {
		out = `{"direct":true,"response":`
	}
	return guest.Output(append(append([]byte(out), body...), '}'))
}

//go:wasmexport store
func store() int32 { return guest.Output([]byte(`{}`)) }
