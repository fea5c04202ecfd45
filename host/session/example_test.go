package session_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"reflect"

	"github.com/wasmhist/wasmhist/host/session"
)

// A session round-trips through JSON as data: Encode checks what it writes
// against schemas/session.json, Decode checks what it reads, and the value
// that comes back equals the one that went in.
func Example() {
	s := &session.Session{
		SchemaVersion: session.SchemaVersion,
		SessionID:     "s-1",
		Revision:      3,
		State: map[string]session.ProviderState{
			"history": {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{"messages":[]}`)},
		},
	}
	b, err := session.Encode(s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))

	back, err := session.Decode(b)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("equal:", reflect.DeepEqual(back, s))
	// Output:
	// {"schema_version":1,"session_id":"s-1","revision":3,"state":{"history":{"provider":"inmemory","state_version":1,"data":{"messages":[]}}}}
	// equal: true
}

// Decode refuses a document that is not a session, saying where it is
// wrong as a JSON Pointer; the error wraps ErrInvalid.
func ExampleDecode() {
	_, err := session.Decode([]byte(`{"schema_version":1,"session_id":"s-1","revision":-1}`))
	fmt.Println(errors.Is(err, session.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// session: invalid session: schema session.json: at /revision: must be >= 0 but found -1 (keyword session.json#/properties/revision/minimum)
}
