package sdk

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
)

// dispatch runs one export of p on its JSON request. It is the whole
// behaviour of a plugin as the host sees it, shared by the WebAssembly
// exports and Handler so that both builds answer alike. kept, nil for
// Handler, is what a WebAssembly guest carries from one call to the next.
//
// It returns the wire error form: malformed requests are invalid_argument,
// missing optional interfaces unimplemented, and a recovered panic internal,
// so that bad input never becomes a trap.
func dispatch(ctx context.Context, p Provider, export string, input []byte, kept *reuse) (out []byte, aerr *abi.Error) {
	if p == nil {
		return nil, &abi.Error{Code: abi.CodeInternal, Message: "sdk: no provider registered: call sdk.Register from an init function of the plugin's main package"}
	}
	defer func() {
		// A panic that Go can recover (not a fatal runtime error such as
		// running out of memory) becomes an ordinary error, so the host
		// reports the plugin's bug without losing the instance to a trap.
		if r := recover(); r != nil {
			out, aerr = nil, &abi.Error{Code: abi.CodeInternal, Message: export + ": panic: " + panicText(r) + panicSite()}
		}
	}()
	// Errors are built without fmt, and requests decoded and responses
	// encoded without encoding/json (see codec.go), so that a plugin links
	// neither unless its own code does.
	var err error
	var dst []byte
	var guess *sessionGuess
	var reused *reuse
	if kept != nil {
		dst, guess = kept.out, &kept.session
		if kept.transient {
			reused = kept
		}
	}
	switch export {
	case abi.ExportDescribe:
		if err = checkDescribeRequest(input); err != nil {
			return nil, invalidRequest(export, err)
		}
		info := p.Describe()
		if info.ABI == "" {
			info.ABI = abi.Version
		}
		out = encodePluginInfo(&info)
	case abi.ExportProvide:
		c := reused.provideCall()
		req := &c.req
		if err = decodeProvideRequest(input, req, c.arena[:0], guess); err != nil {
			return nil, invalidRequest(export, err)
		}
		var resp *abi.ProvideResponse
		if resp, err = p.Provide(ctx, req); err == nil {
			if resp == nil {
				resp = &abi.ProvideResponse{}
			}
			out = encodeProvideResponse(dst, resp)
		}
	case abi.ExportStore:
		c := reused.storeCall()
		req := &c.req
		if err = decodeStoreRequest(input, req, c.arena[:0], guess); err != nil {
			return nil, invalidRequest(export, err)
		}
		var resp *abi.StoreResponse
		if resp, err = p.Store(ctx, req); err == nil {
			if resp == nil {
				resp = &abi.StoreResponse{}
			}
			out = encodeStoreResponse(dst, resp)
		}
	case abi.ExportList:
		l, ok := p.(Lister)
		if !ok {
			return nil, unimplemented(export, "Lister")
		}
		var req abi.ListRequest
		if err = decodeListRequest(input, &req, guess); err != nil {
			return nil, invalidRequest(export, err)
		}
		var resp *abi.ListResponse
		if resp, err = listPage(l.List(ctx, &req)); err == nil {
			out = encodeListResponse(resp)
		}
	case abi.ExportClear:
		c, ok := p.(Clearer)
		if !ok {
			return nil, unimplemented(export, "Clearer")
		}
		var req abi.ClearRequest
		if err = decodeClearRequest(input, &req, guess); err != nil {
			return nil, invalidRequest(export, err)
		}
		var resp *abi.ClearResponse
		if resp, err = c.Clear(ctx, &req); err == nil {
			if resp == nil {
				resp = &abi.ClearResponse{}
			}
			out = encodeStoreResponse(dst, &abi.StoreResponse{StateChange: resp.StateChange})
		}
	case abi.ExportMigrateState:
		m, ok := p.(StateMigrator)
		if !ok {
			return nil, unimplemented(export, "StateMigrator")
		}
		var req abi.MigrateStateRequest
		if err = decodeMigrateStateRequest(input, &req); err != nil {
			return nil, invalidRequest(export, err)
		}
		var resp *abi.MigrateStateResponse
		if resp, err = m.MigrateState(ctx, &req); err == nil {
			if resp == nil {
				resp = &abi.MigrateStateResponse{}
			}
			out = encodeMigrateStateResponse(resp)
		}
	default:
		return nil, &abi.Error{Code: abi.CodeUnimplemented, Message: "sdk: no export " + strconv.Quote(export)}
	}
	if err != nil {
		return nil, abi.AsError(err)
	}
	return out, nil
}

// reuse is what a WebAssembly guest carries from one export call to the
// next, to allocate less:
//   - out, the last output's buffer, which provide's, store's and clear's
//     next answer may overwrite: the host has read it by then, and it is
//     the SDK's own, never the provider's (the input, which the provider
//     may keep what it decoded from, is never reused);
//   - session, the last request's session member, which the next request
//     most often repeats byte for byte, and its facts, whose strings it
//     shares (strings cannot change, so sharing them is safe).
//   - for a Transient provider only, in, the last input buffer, and the
//     last provide's and store's request with its message arena, which
//     the next call overwrites.
type reuse struct {
	out     []byte
	session sessionGuess
	// transient is set when the provider is Transient.
	transient bool
	in        []byte
	provide   *provideCall
	store     *storeCall
}

// maxSpare bounds the output and input buffers a guest keeps between
// calls. Store and provide answers of a plugin that leaves the state out
// are a few kilobytes whatever the history's size, and so are their
// requests; a larger buffer is not kept, so that a pooled instance does
// not hold on to it.
const maxSpare = 64 << 10

// input returns a buffer for the next call's input of n bytes: for a
// Transient provider the last one's if it is large enough, else a new
// one, which k keeps if it is at most maxSpare.
// The caller fills all n bytes.
func (k *reuse) input(n int) []byte {
	if !k.transient {
		return make([]byte, n)
	}
	if cap(k.in) >= n {
		return k.in[:n]
	}
	b := make([]byte, n)
	if n <= maxSpare {
		k.in = b
	}
	return b
}

// provideCall returns the object a provide decodes its request into: the
// last one's, emptied, when k keeps it (a Transient provider's, k not
// nil), else a new one.
func (k *reuse) provideCall() *provideCall {
	if k == nil {
		return new(provideCall)
	}
	return emptied(&k.provide)
}

// storeCall is provideCall for a store.
func (k *reuse) storeCall() *storeCall {
	if k == nil {
		return new(storeCall)
	}
	return emptied(&k.store)
}

// emptied returns *slot set to T's zero value, allocating it the first
// time.
func emptied[T any](slot **T) *T {
	if *slot == nil {
		*slot = new(T)
	} else {
		var zero T
		**slot = zero
	}
	return *slot
}

// invalidRequest is the error for a request that does not decode.
func invalidRequest(export string, err error) *abi.Error {
	return &abi.Error{Code: abi.CodeInvalidArgument, Message: export + ": decode request: " + abi.ErrInvalidArgument.Error() + ": " + err.Error()}
}

// panicSite says where the recovered panic happened, " at file:line in
// function", from the first frame below the panic that is not the Go
// runtime's; the author gets the whole stack by running the provider
// natively (the conformance suite's native run, or a test calling
// Handler), where a panic is not recovered by the host's boundary.
func panicSite() string {
	var pcs [32]uintptr
	// Skip runtime.Callers, panicSite and the deferred function.
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	afterPanic := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			afterPanic = true
		case afterPanic && !strings.HasPrefix(f.Function, "runtime."):
			file := f.File
			if i := strings.LastIndexByte(file, '/'); i >= 0 {
				if j := strings.LastIndexByte(file[:i], '/'); j >= 0 {
					file = file[j+1:]
				}
			}
			return " (at " + file + ":" + strconv.Itoa(f.Line) + " in " + f.Function + "; run the provider natively, e.g. with sdktest, for the whole stack)"
		}
		if !more {
			return ""
		}
	}
}

// panicText describes a recovered value as fmt's %v would for the values
// panics carry in practice (errors, strings, numbers), without fmt. It
// calls no String method on purpose: a reachable call through an interface
// with that method keeps the String methods of every type the plugin puts in
// an interface, time.Time's formatting among them.
func panicText(r any) string {
	switch v := r.(type) {
	case error:
		return v.Error()
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case bool:
		return strconv.FormatBool(v)
	}
	return "a value of a type other than error, string, integer or bool"
}

// listPage makes an empty page encode as [] rather than null: messages is
// required in a list response.
func listPage(resp *abi.ListResponse, err error) (*abi.ListResponse, error) {
	if err == nil && (resp == nil || resp.Messages == nil) {
		page := abi.ListResponse{Messages: []json.RawMessage{}}
		if resp != nil {
			page.NextCursor, page.FromState = resp.NextCursor, resp.FromState
		}
		resp = &page
	}
	return resp, err
}

func unimplemented(export, iface string) *abi.Error {
	return &abi.Error{Code: abi.CodeUnimplemented, Message: export + ": the provider does not implement sdk." + iface}
}
