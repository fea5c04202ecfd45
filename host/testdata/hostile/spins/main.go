//go:build wasip1

// Command spins is the in-memory provider, built with the sdk, whose
// provide never returns: the command's tests check that conformance says
// which limit its cases ran into and which flag raises it.
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

var n int

func (spins) Provide(context.Context, *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	for {
		n++
	}
}

func init() { sdk.Register(spins{}) }

func main() {}
