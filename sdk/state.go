package sdk

import (
	"encoding/json"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
)

// DecodeState decodes a request's state into a T. An absent state (the host
// omitted it, see abi.PluginInfo.OmitState) decodes to the zero T. A state
// that does not decode is an error wrapping abi.ErrInvalidArgument.
//
// Declare message lists in T as []json.RawMessage: the messages then stay
// opaque bytes and the guest does not pay for decoding them.
func DecodeState[T any](state json.RawMessage) (T, error) {
	return decode[T]("state", state)
}

// DecodeConfig decodes the operator's plugin config into a T. An absent
// config decodes to the zero T. The host has already validated the config
// against PluginInfo.ConfigSchema at load; a config that does not decode is
// an error wrapping abi.ErrInvalidArgument.
func DecodeConfig[T any](config json.RawMessage) (T, error) {
	return decode[T]("config", config)
}

func decode[T any](what string, raw json.RawMessage) (T, error) {
	var v T
	if len(raw) == 0 || string(raw) == "null" {
		return v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("sdk: decode %s: %w: %w", what, abi.ErrInvalidArgument, err)
	}
	return v, nil
}

// AppendOps returns the state patch that appends msgs, in order, to the JSON
// array at pointer (an RFC 6901 JSON Pointer into the state, such as
// "/messages"). The messages are passed through as they are, never decoded,
// and the host applies the patch natively, so storing costs the guest only
// the new messages whatever the size of the history.
func AppendOps(pointer string, msgs []json.RawMessage) []abi.PatchOp {
	path := pointer + "/-"
	ops := make([]abi.PatchOp, len(msgs))
	for i, m := range msgs {
		ops[i] = abi.PatchOp{Op: abi.PatchAdd, Path: path, Value: m}
	}
	return ops
}
