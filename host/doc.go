// Package host embeds wasmhist in a Go program: it loads history-provider
// plugins (WebAssembly modules speaking the ABI in package abi) into pools of
// sandboxed instances, bounds every call in time and memory, and runs an
// agent loop whose sessions are plain JSON data.
package host
