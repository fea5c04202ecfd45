package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
)

// CapabilityFunc is a host capability function as a guest imports it: it
// takes the Extism kernel offset of a JSON request and returns the offset of
// the JSON response. The functions of the ABI's capabilities (abi.SQLFunction)
// are built in; a function this package does not know is declared with
//
//	//go:wasmimport wasmhist:host/v1 <name>
//	func call(request uint64) (response uint64)
//
// in a file built only for wasip1, and registered with
// RegisterCapabilityFunc.
type CapabilityFunc func(request uint64) (response uint64)

// capabilityFuncs holds registered capability functions by import name.
// WebAssembly import names are fixed when the plugin is compiled, so
// CallCapability cannot import a function by a name it learns at run time.
// It is filled by init functions only, before any call, so it needs no lock.
var capabilityFuncs = map[string]CapabilityFunc{}

// RegisterCapabilityFunc makes fn callable as CallCapability(name, ...). Call
// it from an init function of the package that declares fn. It panics on a
// duplicate name, a programming error.
func RegisterCapabilityFunc(name string, fn CapabilityFunc) {
	if fn == nil {
		panic("sdk: RegisterCapabilityFunc called with a nil function")
	}
	if _, dup := capabilityFuncs[name]; dup {
		panic("sdk: RegisterCapabilityFunc called twice for " + name)
	}
	capabilityFuncs[name] = fn
}

// CallCapability calls the host capability function name (for example
// abi.SQLFunction) with a JSON request and returns the JSON result. A failure
// the host reports (capability not granted, bad request, ...) is an error
// wrapping an *abi.Error with its code, usable with errors.Is
// (abi.ErrPermissionDenied, ...). The plugin must list the capability in
// PluginInfo.Capabilities.
//
// Only plugins that call CallCapability import capability functions, so a
// plugin without capabilities loads on hosts that offer none. Capability
// functions exist only in the WebAssembly build: natively, and for a name
// neither built in nor registered, CallCapability returns an error wrapping
// abi.ErrUnimplemented.
func CallCapability(name string, request []byte) ([]byte, error) {
	fn, ok := capabilityFuncs[name]
	if !ok {
		fn = builtinCapabilityFunc(name)
	}
	if fn == nil {
		return nil, fmt.Errorf("sdk: call capability %s: %w: no capability function of that name is linked into this plugin", name, abi.ErrUnimplemented)
	}
	resp, err := callCapability(fn, request)
	if err != nil {
		return nil, fmt.Errorf("sdk: call capability %s: %w", name, err)
	}
	return decodeCapabilityResponse(name, resp)
}

// capabilityResponse is the envelope every capability function answers with.
type capabilityResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *abi.Error      `json:"error"`
}

func decodeCapabilityResponse(name string, resp []byte) ([]byte, error) {
	// A response has exactly one member (SPEC.md section 8), so one that
	// starts with "result" is that value up to the closing brace. Slicing
	// it out spares a decoding pass over every row a query returned, which
	// in a preemptible Go guest costs about as much as the rest of a call.
	if r, ok := bytes.CutPrefix(bytes.TrimRight(resp, " \t\r\n"), []byte(`{"result":`)); ok && len(r) > 1 && r[len(r)-1] == '}' {
		return r[:len(r)-1], nil
	}
	var r capabilityResponse
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, fmt.Errorf("sdk: call capability %s: %w: malformed response: %w", name, abi.ErrInternal, err)
	}
	if r.Error != nil {
		if !r.Error.Code.Known() {
			// Keep errors.Is meaningful for codes of a newer host.
			r.Error = abi.Errorf(abi.CodeInternal, "unknown code %q: %s", r.Error.Code, r.Error.Message)
		}
		return nil, fmt.Errorf("sdk: call capability %s: %w", name, r.Error)
	}
	return r.Result, nil
}
