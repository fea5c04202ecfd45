// Package guestjson is the JSON scanner shared by the guest side of
// wasmhist: the sdk's request codec, sdk/sql's response decoder and the
// sample plugins read their JSON through it. The host reads the plain case
// of a plugin's sql requests and of its provide, store and clear responses
// through it too, and every document schema.Decode checks (the session,
// messages, state values), and leaves the rest to encoding/json.
//
// It exists because encoding/json is the wrong tool inside a Go WebAssembly
// guest. Compiled to wasm it decodes 10 to 23 times slower than native Go,
// it scans every byte several times and works through reflection, and a
// reachable json.Unmarshal links about 1.5 MB of reflective codec into the
// module, which the host validates on every load. A Decoder makes one
// validating pass, hands values back as the exact bytes of the document
// (messages are never decoded), and decodes only the strings and integers a
// caller asks for. It links neither fmt nor encoding/json, so a plugin that
// reads its JSON here stays free of both (see sdktest.CheckLean).
//
// What a Decoder accepts is valid JSON (RFC 8259) and decodes as
// encoding/json decodes it; FuzzDecoder holds it to that. It refuses, on
// purpose, documents nested deeper than MaxDepth. Every failure is a
// *SyntaxError with the offset where decoding stopped; errors.Is(err,
// ErrSyntax) matches any of them.
package guestjson
