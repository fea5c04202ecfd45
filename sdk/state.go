package sdk

import (
	"encoding/json"
	"errors"
	"sync/atomic"

	"github.com/wasmhist/wasmhist/abi"
)

// ErrStateOmitted is DecodeState's error for a request without a state.
// The host leaves the state out of exactly the exports the plugin lists in
// PluginInfo.OmitState, so reading it there is a bug: the zero state it
// would decode to is not the session's, and a store built on it would
// replace the history with the newest turn.
var ErrStateOmitted = errors.New("sdk: DecodeState: the request carries no state because the plugin lists this export in omit_state " +
	"(PluginInfo.OmitState): remove the export from OmitState to read the state, or do not read it there")

// DecodeState decodes a request's state into a T. A state that does not
// decode is an error wrapping abi.ErrInvalidArgument. An absent (or null)
// state is ErrStateOmitted, with the zero T: the host sends a state to
// every export the plugin does not list in abi.PluginInfo.OmitState.
//
// Declare message lists in T as []json.RawMessage: the messages then stay
// opaque bytes and the guest does not pay for decoding them.
func DecodeState[T any](state json.RawMessage) (T, error) {
	if len(state) == 0 || string(state) == "null" {
		var zero T
		return zero, ErrStateOmitted
	}
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
		return v, Wrap("sdk: decode "+what, abi.ErrInvalidArgument, err)
	}
	return v, nil
}

// AppendOps returns the state patch that appends the messages of each list,
// in order, to the JSON array at pointer (an RFC 6901 JSON Pointer into the
// state, such as "/messages"): AppendOps("/messages",
// req.RequestMessages, req.ResponseMessages) stores a turn. The messages
// are passed through as they are, never decoded, and the host applies the
// patch natively, so storing costs the guest only the new messages whatever
// the size of the history. With no messages it returns nil: no change.
func AppendOps(pointer string, lists ...[]json.RawMessage) []abi.PatchOp {
	n := countMessages(lists)
	if n == 0 {
		return nil
	}
	return appendOps(make([]abi.PatchOp, 0, n), pointer, lists)
}

// AppendStore returns the store response whose patch is AppendOps(pointer,
// lists...): return sdk.AppendStore("/messages", req.RequestMessages,
// req.ResponseMessages) stores a turn. A turn's user message and reply
// take one allocation for the response and its patch rather than two
// (each costs a WebAssembly guest a few thousand instructions). With no
// messages the response changes nothing.
func AppendStore(pointer string, lists ...[]json.RawMessage) *abi.StoreResponse {
	n := countMessages(lists)
	if n == 0 {
		return &abi.StoreResponse{}
	}
	if n > turnOps {
		return &abi.StoreResponse{StateChange: abi.StateChange{Patch: appendOps(make([]abi.PatchOp, 0, n), pointer, lists)}}
	}
	t := new(turnStore)
	t.resp.Patch = appendOps(t.ops[:0:n], pointer, lists)
	return &t.resp
}

// turnOps is how many appended messages AppendStore answers in one
// allocation: a turn's user message and reply.
const turnOps = 2

// turnStore is a store response and the patch of a turn, allocated together.
type turnStore struct {
	resp abi.StoreResponse
	ops  [turnOps]abi.PatchOp
}

// countMessages is how many messages lists hold together.
func countMessages(lists [][]json.RawMessage) int {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	return n
}

// appendOps appends to ops an add operation at pointer's end for each
// message of lists, in order.
func appendOps(ops []abi.PatchOp, pointer string, lists [][]json.RawMessage) []abi.PatchOp {
	path := appendPath(pointer)
	for _, l := range lists {
		for _, m := range l {
			ops = append(ops, abi.PatchOp{Op: abi.PatchAdd, Path: path, Value: m})
		}
	}
	return ops
}

// lastAppend is the last pointer AppendOps was given and its path, so that
// a provider appending to the same array every store does not build (and
// allocate) the same string every time. Strings do not change, so sharing
// one is safe; the pair is swapped whole, since a native Handler may run
// stores at once.
var lastAppend atomic.Pointer[[2]string]

func appendPath(pointer string) string {
	if last := lastAppend.Load(); last != nil && last[0] == pointer {
		return last[1]
	}
	path := pointer + "/-"
	lastAppend.Store(&[2]string{pointer, path})
	return path
}
