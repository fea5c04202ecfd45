package portable_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
)

// Export a session with its history, then read it back page by page, as
// an import hands it to a plugin.
func Example() {
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "demo", Revision: 2,
		State: map[string]session.ProviderState{"history": {Provider: "inmemory", StateVersion: 1, Data: json.RawMessage(`{}`)}}}
	var doc bytes.Buffer
	w, _ := portable.NewWriter(&doc, s)
	_ = w.BeginSlot("history")
	for _, text := range []string{"hello", "hi there", "bye"} {
		role := abi.RoleUser
		if text == "hi there" {
			role = abi.RoleAssistant
		}
		_ = w.WriteMessage(abi.NewMessage(role, text))
	}
	if err := w.Close(); err != nil {
		fmt.Println(err)
		return
	}

	r, err := portable.NewReader(&doc, portable.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("session", r.Session().SessionID, "at revision", r.Session().Revision)
	for slot, err := range r.Slots() {
		if err != nil {
			fmt.Println(err)
			return
		}
		for page, err := range slot.Pages(2) {
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("slot %s (%s): a page of %d\n", slot.Key, slot.Plugin, len(page))
		}
	}
	// Output:
	// session demo at revision 2
	// slot history (inmemory): a page of 2
	// slot history (inmemory): a page of 1
}

// A history moves to another framework as a Chat Completions messages
// array, and back.
func ExampleWriteOpenAI() {
	history := []abi.Message{
		abi.NewMessage(abi.RoleUser, "What time is it?"),
		{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c1", Name: "clock", Arguments: json.RawMessage(`{}`)}}},
		{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: "c1", Result: json.RawMessage(`"noon"`)}}},
		abi.NewMessage(abi.RoleAssistant, "It is noon."),
	}
	_ = portable.WriteOpenAI(os.Stdout, func(yield func(abi.Message, error) bool) {
		for _, m := range history {
			if !yield(m, nil) {
				return
			}
		}
	})
	for m, err := range portable.ReadOpenAI(strings.NewReader(`[{"role":"user","content":"Hi"}]`), portable.Limits{}) {
		fmt.Println(m.Role, m.TextContent(), err)
	}
	// Output:
	// [
	// {"content":"What time is it?","role":"user"},
	// {"tool_calls":[{"id":"c1","function":{"arguments":"{}","name":"clock"},"type":"function"}],"role":"assistant"},
	// {"content":"noon","tool_call_id":"c1","role":"tool"},
	// {"content":"It is noon.","role":"assistant"}
	// ]
	// user Hi <nil>
}
