// Package abi is the contract between the wasmhist host and history-provider
// plugins: the wire types that cross the WebAssembly boundary, the export and
// capability names, the version constants and the error codes.
//
// It plays the role database/sql/driver plays for database/sql: plugin authors
// (through package sdk) and the host both depend on it, and it depends on
// nothing but the standard library, so it builds for GOOS=wasip1 as well as
// natively. SPEC.md in this directory is the normative description of ABI v1;
// this package is its Go rendering.
//
// Messages are opaque to plugins on the wire: envelopes carry them as
// json.RawMessage so a plugin can store and return them without decoding.
// Message and Content are the host's typed view of the same JSON.
package abi
