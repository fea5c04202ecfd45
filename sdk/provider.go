package sdk

import (
	"context"

	"github.com/wasmhist/wasmhist/abi"
)

// Provider is what every plugin implements: the required exports describe,
// provide and store.
type Provider interface {
	// Describe returns the plugin's PluginInfo. An empty ABI field is filled
	// with abi.Version, the ABI this package implements.
	Describe() abi.PluginInfo
	// Provide returns the history to put before the request messages.
	Provide(ctx context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error)
	// Store records a call's new request and response messages.
	Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error)
}

// Lister is implemented by providers that can page through what they stored
// (the optional list export).
type Lister interface {
	List(ctx context.Context, req *abi.ListRequest) (*abi.ListResponse, error)
}

// Clearer is implemented by providers that can forget a session's history
// (the optional clear export).
type Clearer interface {
	Clear(ctx context.Context, req *abi.ClearRequest) (*abi.ClearResponse, error)
}

// StateMigrator is implemented by providers whose state layout changed: it
// brings a state written at an older PluginInfo.StateVersion up to the
// current one (the optional migrate_state export).
type StateMigrator interface {
	MigrateState(ctx context.Context, req *abi.MigrateStateRequest) (*abi.MigrateStateResponse, error)
}

// Transient is implemented by providers that keep nothing a request
// hands them past the call: not the request, not its message lists, not
// any bytes of its messages, state or config. A response built from them
// is fine, since it is encoded before the call returns. A WebAssembly
// guest then writes the next request over the last one's memory (the
// input buffer, the request and its message arena) instead of allocating
// them again, which saves a provide or a store two of its three or four
// allocations (each costs a guest a few thousand instructions). A provider
// that keeps any of it and claims Transient sees it change under it; one
// that does not implement Transient is never affected.
type Transient interface {
	// Transient marks the provider; it is never called.
	Transient()
}

// registered is the provider the WebAssembly exports dispatch to. It is set
// once, from an init function, before the host makes any call, and a guest
// runs one call at a time, so it needs no lock.
var registered Provider

// kept is what one WebAssembly export call leaves for the next (see
// reuse); Register says whether the provider is Transient.
var kept reuse

// Register makes p the plugin's provider. Call it exactly once, from an init
// function of the plugin's main package. It panics when called twice or with
// nil, because either is a programming error a plugin must not ship with.
func Register(p Provider) {
	if p == nil {
		panic("sdk: Register called with a nil Provider")
	}
	if registered != nil {
		panic("sdk: Register called twice")
	}
	registered = p
	_, kept.transient = p.(Transient)
}

// Handler returns an abi.Handler that runs p in process exactly as the
// WebAssembly exports run it: it decodes the export's JSON request, calls p
// and encodes the response, mapping errors with abi.AsError. The host loads
// a Handler as a native plugin, which is how plugin logic is unit tested and
// benchmarked without a WebAssembly build.
func Handler(p Provider) abi.Handler {
	return func(ctx context.Context, export string, input []byte) ([]byte, error) {
		// The error is the wire form (*abi.Error), so native and
		// WebAssembly builds fail alike: same code, same message. A nil
		// *abi.Error must not become a non-nil error interface.
		out, aerr := dispatch(ctx, p, export, input, nil)
		if aerr != nil {
			return nil, aerr
		}
		return out, nil
	}
}
