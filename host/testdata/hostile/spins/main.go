//go:build wasip1

// Command spins is the in-memory provider, built with the sdk, whose
// provide never returns, writing its memory as it spins: the command's
// tests check that conformance says which limit its cases ran into and
// which flag raises it, and the host's that closing the plugin under such
// a call leaves the call its memory.
package main

import (
	"context"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
)

type spins struct{ provider.Provider }

func (p spins) Describe() abi.PluginInfo {
	info := p.Provider.Describe()
	info.Name = "spins"
	return info
}

var buf = make([]byte, 1<<12)

func (spins) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	for {
		for i := range buf {
			buf[i]++
		}
	}
}

func init() { sdk.Register(spins{}) }

func main() {}
