// Package host is the wasmhist plugin runtime: it loads history-provider
// plugins (WebAssembly modules speaking the ABI in package abi) into pools
// of sandboxed instances, bounds every call in time and memory, grants the
// capabilities an operator allows, and serves a plugin as the history
// provider of one state key in plain-data sessions (package host/session).
//
// The agent loop that uses such providers lives beside it, in package
// host/agent; nothing here knows about models, tools or runs.
package host
