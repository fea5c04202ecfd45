//go:build wasip1

// Command exits is the in-memory provider, built with the sdk (so its
// output goes through the direct transport, in its own memory), that ends
// its module with os.Exit instead of returning when a stored message says
// "hostile:exit" (status 0) or "hostile:exit3" (status 3). SPEC section 1
// forbids proc_exit; the host's tests check that it fails that call alone,
// on the interpreter and on compiled code, and that the next call gets a
// fresh instance.
package main

import (
	"bytes"
	"context"
	"os"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
)

type exits struct{ provider.Provider }

func (p exits) Describe() abi.PluginInfo {
	info := p.Provider.Describe()
	info.Name = "exits"
	return info
}

func (p exits) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	for _, m := range req.RequestMessages {
		switch {
		case bytes.Contains(m, []byte("hostile:exit3")):
			os.Exit(3)
		case bytes.Contains(m, []byte("hostile:exit")):
			os.Exit(0)
		}
	}
	return p.Provider.Store(ctx, req)
}

func init() { sdk.Register(exits{}) }

func main() {}
