package sdk

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
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
		return nil, Wrap("sdk: call capability "+name, abi.ErrUnimplemented, errNoFunction)
	}
	resp, err := callCapability(fn, request)
	if err != nil {
		return nil, Wrap("sdk: call capability "+name, err)
	}
	return decodeCapabilityResponse(name, resp)
}

// errNoFunction is the text CallCapability gives a name it has no
// function for.
var errNoFunction = errors.New("no capability function of that name is linked into this plugin")

func decodeCapabilityResponse(name string, resp []byte) ([]byte, error) {
	// A response has exactly one member (SPEC.md section 8), so one that
	// starts with "result" is that value up to the closing brace. Slicing
	// it out spares a decoding pass over every row a query returned, which
	// in a preemptible Go guest costs about as much as the rest of a call.
	if r, ok := bytes.CutPrefix(bytes.TrimRight(resp, " \t\r\n"), []byte(`{"result":`)); ok && len(r) > 1 && r[len(r)-1] == '}' {
		return r[:len(r)-1], nil
	}
	// Any other response is read with the guest's scanner, not
	// encoding/json, which would link its reflective codec into every
	// plugin that calls a capability.
	result, rerr, err := parseCapabilityResponse(resp)
	if err != nil {
		return nil, Wrap("sdk: call capability "+name, abi.ErrInternal, errors.New("malformed response"), err)
	}
	if rerr != nil {
		if !rerr.Code.Known() {
			// Keep errors.Is meaningful for codes of a newer host.
			rerr = &abi.Error{Code: abi.CodeInternal, Message: "unknown code " + strconv.Quote(string(rerr.Code)) + ": " + rerr.Message}
		}
		return nil, Wrap("sdk: call capability "+name, rerr)
	}
	return result, nil
}

// parseCapabilityResponse decodes the envelope every capability function
// answers with, {"result": ...} or {"error": {"code": ..., "message": ...}},
// as encoding/json decoded it into a struct of a json.RawMessage and an
// *abi.Error: unknown members are ignored, null is absent.
func parseCapabilityResponse(resp []byte) (result []byte, rerr *abi.Error, err error) {
	d := guestjson.NewDecoder(resp)
	err = d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "result":
			if result, err = d.ReadValue(); string(result) == "null" {
				result = nil
			}
		case "error":
			if d.Peek() == 'n' {
				rerr = nil
				return d.ReadNull()
			}
			if d.Peek() != '{' {
				return d.Fail("error: want an object")
			}
			rerr = &abi.Error{}
			err = d.Object(func(key []byte) (err error) {
				switch string(key) {
				case "code":
					var c string
					c, err = d.ReadString()
					rerr.Code = abi.Code(c)
				case "message":
					rerr.Message, err = d.ReadString()
				default:
					err = d.Skip()
				}
				return err
			})
		default:
			err = d.Skip()
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	return result, rerr, err
}
