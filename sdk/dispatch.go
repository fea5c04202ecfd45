package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
)

// dispatch runs one export of p on its JSON request. It is the whole
// behaviour of a plugin as the host sees it, shared by the WebAssembly
// exports and Handler so that both builds answer alike.
//
// It returns the wire error form: malformed requests are invalid_argument,
// missing optional interfaces unimplemented, and a recovered panic internal,
// so that bad input never becomes a trap.
func dispatch(ctx context.Context, p Provider, export string, input []byte) (out []byte, aerr *abi.Error) {
	if p == nil {
		return nil, abi.Errorf(abi.CodeInternal, "sdk: no provider registered: call sdk.Register from an init function of the plugin's main package")
	}
	defer func() {
		// A panic that Go can recover (not a fatal runtime error such as
		// running out of memory) becomes an ordinary error, so the host
		// reports the plugin's bug without losing the instance to a trap.
		if r := recover(); r != nil {
			out, aerr = nil, abi.Errorf(abi.CodeInternal, "%s: panic: %v", export, r)
		}
	}()
	var err error
	switch export {
	case abi.ExportDescribe:
		out, err = describe(p, input)
	case abi.ExportProvide:
		var req abi.ProvideRequest
		if err = decodeProvideRequest(input, &req); err != nil {
			err = fmt.Errorf("%s: decode request: %w: %w", export, abi.ErrInvalidArgument, err)
			break
		}
		var resp *abi.ProvideResponse
		if resp, err = p.Provide(ctx, &req); err == nil {
			if resp == nil {
				resp = &abi.ProvideResponse{}
			}
			out = encodeProvideResponse(resp)
		}
	case abi.ExportStore:
		var req abi.StoreRequest
		if err = decodeStoreRequest(input, &req); err != nil {
			err = fmt.Errorf("%s: decode request: %w: %w", export, abi.ErrInvalidArgument, err)
			break
		}
		var resp *abi.StoreResponse
		if resp, err = p.Store(ctx, &req); err == nil {
			if resp == nil {
				resp = &abi.StoreResponse{}
			}
			out = encodeStoreResponse(resp)
		}
	case abi.ExportList:
		l, ok := p.(Lister)
		if !ok {
			return nil, unimplemented(export, "Lister")
		}
		var req abi.ListRequest
		if err = decodeRequest(export, input, &req); err == nil {
			out, err = encodeResponse(listPage(l.List(ctx, &req)))
		}
	case abi.ExportClear:
		c, ok := p.(Clearer)
		if !ok {
			return nil, unimplemented(export, "Clearer")
		}
		var req abi.ClearRequest
		if err = decodeRequest(export, input, &req); err == nil {
			out, err = encodeResponse(c.Clear(ctx, &req))
		}
	case abi.ExportMigrateState:
		m, ok := p.(StateMigrator)
		if !ok {
			return nil, unimplemented(export, "StateMigrator")
		}
		var req abi.MigrateStateRequest
		if err = decodeRequest(export, input, &req); err == nil {
			out, err = encodeResponse(m.MigrateState(ctx, &req))
		}
	default:
		return nil, abi.Errorf(abi.CodeUnimplemented, "sdk: no export %q", export)
	}
	if err != nil {
		return nil, abi.AsError(err)
	}
	return out, nil
}

// listPage makes an empty page encode as [] rather than null: messages is
// required in a list response.
func listPage(resp *abi.ListResponse, err error) (*abi.ListResponse, error) {
	if err == nil && (resp == nil || resp.Messages == nil) {
		page := abi.ListResponse{Messages: []json.RawMessage{}}
		if resp != nil {
			page.NextCursor = resp.NextCursor
		}
		resp = &page
	}
	return resp, err
}

func unimplemented(export, iface string) *abi.Error {
	return abi.Errorf(abi.CodeUnimplemented, "%s: the provider does not implement sdk.%s", export, iface)
}

func describe(p Provider, input []byte) ([]byte, error) {
	// describe takes no request; the host may send nothing or an object,
	// and anything else is a malformed request rather than something to
	// ignore silently.
	if in := bytes.TrimSpace(input); len(in) > 0 {
		var v map[string]json.RawMessage
		if err := json.Unmarshal(in, &v); err != nil {
			return nil, fmt.Errorf("describe: decode request: %w: %w", abi.ErrInvalidArgument, err)
		}
	}
	info := p.Describe()
	if info.ABI == "" {
		info.ABI = abi.Version
	}
	out, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("describe: encode plugin info: %w", err)
	}
	return out, nil
}

// decodeRequest decodes an export's request. Unknown fields are ignored so
// that a newer host's requests reach an older plugin; anything that is not a
// JSON object, or has a known field of the wrong type, is invalid_argument.
func decodeRequest(export string, input []byte, req any) error {
	in := bytes.TrimLeft(input, " \t\r\n")
	if len(in) == 0 || in[0] != '{' {
		return fmt.Errorf("%s: decode request: %w: the request is not a JSON object", export, abi.ErrInvalidArgument)
	}
	if err := json.Unmarshal(in, req); err != nil {
		return fmt.Errorf("%s: decode request: %w: %w", export, abi.ErrInvalidArgument, err)
	}
	return nil
}

// encodeResponse encodes what a provider method returned. A nil response
// with a nil error is the empty response: no messages, no state change.
func encodeResponse[R any](resp *R, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if resp == nil {
		resp = new(R)
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("encode response: %w", err)
	}
	return out, nil
}
