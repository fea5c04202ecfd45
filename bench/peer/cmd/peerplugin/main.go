// Command peerplugin is the in-memory history provider
// (plugins/inmemory/provider, the code of the in-memory WebAssembly plugin)
// as a go-plugin plugin process served over gRPC. The benchmarks of
// package peer build and start it.
package main

import (
	"github.com/wasmhist/wasmhist/bench/peer"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
)

func main() { peer.Serve(sdk.Handler(provider.Provider{})) }
