// Package sdk is the Go kit for writing wasmhist history-provider plugins.
//
// A plugin is a Go main package compiled to WebAssembly. The author
// implements Provider (and, optionally, Lister, Clearer and StateMigrator),
// registers it once from an init function, and leaves main empty:
//
//	package main
//
//	import (
//		"context"
//
//		"github.com/wasmhist/wasmhist/abi"
//		"github.com/wasmhist/wasmhist/sdk"
//	)
//
//	type provider struct{}
//
//	func (provider) Describe() abi.PluginInfo { ... }
//	func (provider) Provide(ctx context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) { ... }
//	func (provider) Store(ctx context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) { ... }
//
//	func init() { sdk.Register(provider{}) }
//
//	func main() {}
//
// and is built with the standard toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o myplugin.wasm .
//
// Importing this package is what makes the module a plugin: the package
// carries the ABI's exports (the marker wasmhist_abi_v1, describe, provide,
// store, list, clear, migrate_state) and the Extism kernel imports, so the
// author never sees memory offsets. main must stay empty because a
// -buildmode=c-shared module never runs it; init functions do run, once, when
// the host initialises an instance.
//
// What a provider must do:
//   - Keep everything it knows about a session in that session's state (or,
//     with a capability such as sql, in storage keyed by something the state
//     holds, not by SessionFacts.SessionID alone, so that two state keys of
//     one session stay apart: abi/SPEC.md section 4). Instances are pooled,
//     recycled and dropped by the host at any time, so nothing may be
//     remembered between calls in memory.
//   - Treat messages as opaque JSON values where it can: append them to
//     state with AppendOps and return stored history by reference with
//     abi.StateSelection, so the host does the heavy JSON work natively.
//   - List in PluginInfo.OmitState the exports that need no state, so large
//     states do not cross the boundary.
//   - Report failures as errors; an *abi.Error or an error wrapping one of
//     the abi sentinels (abi.ErrNotFound, ...) keeps its code, anything else
//     reaches the host as abi.CodeInternal. DecodeState and DecodeConfig
//     already return errors wrapping abi.ErrInvalidArgument.
//   - Keep fmt and encoding/json's codec out of the guest: one reachable
//     call links either package wholesale (about 0.7 and 1.5 MB), and the
//     host reads and compiles the whole module on its first load and maps
//     and checksums all of its compiled code on every load. Wrap joins
//     errors as fmt.Errorf's %w does; sdktest.CheckLean checks a build.
//
// Optional exports are detected at run time, as database/sql detects optional
// driver interfaces: a provider that does not implement Lister answers list
// with an abi.CodeUnimplemented error, and so on.
//
// Handler runs the same dispatch in process, so plugin logic can be unit
// tested natively and loaded natively by the host; package sdktest holds the
// conformance suite every provider must pass, natively and as WebAssembly.
//
// Host capabilities (such as sql) are reached with CallCapability; their
// typed clients live in subpackages.
package sdk
