//go:build wasip1

// Command misbehave is a history provider that keeps messages in its state
// and behaves, until a request carries a trigger word: then it misbehaves in
// the way the word names. The host's tests use it to check that every kind
// of misbehaviour yields its own error and that the next call still works.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/host/testdata/hostile/guest"
)

func main() {}

const info = `{"name":"misbehave","version":"0.1.0","abi":"1.0","state_version":1,
"state_schema":{"type":"object","properties":{"messages":{"type":"array"}},"required":["messages"],"additionalProperties":false},
"initial_state":{"messages":[]},
"config_schema":{"type":"object","properties":{"max":{"type":"integer","minimum":0}},"additionalProperties":false}}`

//go:wasmexport wasmhist_abi_v1
func marker() int32 { return 0 }

//go:wasmexport describe
func describe() int32 { return guest.Output([]byte(info)) }

var sink [][]byte

// misbehave acts on a trigger word in the input; it returns false when there
// is none.
func misbehave(in []byte) (int32, bool) {
	i := bytes.Index(in, []byte("hostile:"))
	if i < 0 {
		return 0, false
	}
	word := string(in[i+len("hostile:"):])
	if j := strings.IndexAny(word, `"\ `); j >= 0 {
		word = word[:j]
	}
	switch word {
	case "loop":
		n := 0
		for {
			n++
		}
	case "hog":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "bomb":
		return guest.Output(bytes.Repeat([]byte("x"), 1<<20)), true
	case "badjson":
		return guest.Output([]byte(`{"state": {"messages": [`)), true
	case "badstate":
		return guest.Output([]byte(`{"state": {"messages": "not an array", "extra": 1}}`)), true
	case "panic":
		panic("hostile: asked to panic")
	case "exitafter":
		// An answer in the kernel, then proc_exit(0), as go-sdk takes
		// for a return: the answer stands, the module is gone.
		guest.Output([]byte(`{}`))
		os.Exit(0)
	case "error":
		return guest.Error(`{"code":"not_found","message":"asked to fail"}`), true
	case "entropy":
		// Reports what the sandbox gives a guest for randomness and time,
		// so the host's tests can check neither is a fixed fake.
		var b [16]byte
		rand.Read(b[:])
		return guest.Error(fmt.Sprintf(`{"code":"internal","message":"%s %d"}`, hex.EncodeToString(b[:]), time.Now().Unix())), true
	}
	return guest.Error(`{"code":"invalid_argument","message":"unknown trigger"}`), true
}

//go:wasmexport provide
func provide() int32 {
	in := guest.Input()
	if rc, ok := misbehave(in); ok {
		return rc
	}
	return guest.Output([]byte(`{"from_state":{"pointer":"/messages"}}`))
}

//go:wasmexport store
func store() int32 {
	in := guest.Input()
	if rc, ok := misbehave(in); ok {
		return rc
	}
	var req struct {
		State struct {
			Messages []json.RawMessage `json:"messages"`
		} `json:"state"`
		RequestMessages  []json.RawMessage `json:"request_messages"`
		ResponseMessages []json.RawMessage `json:"response_messages"`
	}
	if err := json.Unmarshal(in, &req); err != nil {
		return guest.Error(`{"code":"invalid_argument","message":"bad request"}`)
	}
	msgs := append(req.State.Messages, req.RequestMessages...)
	msgs = append(msgs, req.ResponseMessages...)
	if msgs == nil {
		msgs = []json.RawMessage{}
	}
	out, _ := json.Marshal(map[string]any{"state": map[string]any{"messages": msgs}})
	return guest.Output(out)
}
