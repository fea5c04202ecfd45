// Command inmemory is the wasmhist plugin that keeps a session's chat
// history in the session's own state, as {"messages": [...]}. Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o inmemory.wasm ./plugins/inmemory
//
// Its logic lives in package provider, which also runs natively.
package main

import (
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
)

func init() { sdk.Register(provider.Provider{}) }

// main never runs in a -buildmode=c-shared module; the host calls the
// exports package sdk defines.
func main() {}
