package provider

import (
	"encoding/json"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// The plugin reads its config and, for list, its state with the guest
// side's shared scanner (sdk.JSONDecoder) rather than with encoding/json
// (sdk.DecodeConfig, sdk.DecodeState): the plugin then links neither
// encoding/json's codec nor the reflection it works through, which keeps
// the module small and its load fast. Both documents are tiny in structure:
// an object of two integers, and an object holding one array whose elements
// are kept as the exact bytes stored.

// invalid is a document that does not decode: invalid_argument, as a state
// or config that does not decode has always been.
func invalid(what string, err error) error {
	return &abi.Error{Code: abi.CodeInvalidArgument, Message: "inmemory: decode " + what + ": " + abi.ErrInvalidArgument.Error() + ": " + err.Error()}
}

// parseConfig decodes the config; absent members are zero and unknown ones
// are ignored.
func parseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	if len(raw) == 0 {
		return cfg, nil
	}
	d := sdk.NewJSONDecoder(raw)
	err := d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "max_messages":
			cfg.MaxMessages, err = d.ReadInt()
		case "max_tokens":
			cfg.MaxTokens, err = d.ReadInt()
		default:
			err = d.Skip()
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return cfg, invalid("config", err)
	}
	return cfg, nil
}

// stateMessages returns the elements of the state's messages array, each
// the exact bytes stored, without decoding them.
func stateMessages(raw json.RawMessage) ([]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var msgs []json.RawMessage
	d := sdk.NewJSONDecoder(raw)
	err := d.Object(func(key []byte) error {
		if string(key) != "messages" {
			return d.Skip()
		}
		switch d.Peek() {
		case 'n':
			msgs = nil
			return d.ReadNull()
		case '[':
		default:
			return d.Fail("messages: want an array")
		}
		msgs = []json.RawMessage{}
		return d.Array(func() error {
			m, err := d.ReadValue()
			msgs = append(msgs, m)
			return err
		})
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return nil, invalid("state", err)
	}
	return msgs, nil
}
