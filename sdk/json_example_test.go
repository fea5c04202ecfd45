package sdk_test

import (
	"fmt"

	"github.com/wasmhist/wasmhist/sdk"
)

// A plugin reads its state without encoding/json: the fields it wants are
// decoded, the rest skipped, and each message kept as its exact bytes.
func ExampleNewJSONDecoder() {
	state := []byte(`{"turns":2,"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]},{"role":"assistant"}],"note":null}`)
	var turns int
	var messages [][]byte
	d := sdk.NewJSONDecoder(state)
	err := d.Object(func(key []byte) error {
		var err error
		switch string(key) {
		case "turns":
			turns, err = d.ReadInt()
		case "messages":
			err = d.Array(func() error {
				m, err := d.ReadValue() // the element's bytes, not decoded
				messages = append(messages, m)
				return err
			})
		default:
			err = d.Skip()
		}
		return err
	})
	if err == nil {
		err = d.End() // nothing but space after the document
	}
	fmt.Println(turns, len(messages), string(messages[1]), err)
	// Output: 2 2 {"role":"assistant"} <nil>
}
