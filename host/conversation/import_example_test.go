package conversation_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// The sample plugins; `make plugins` builds them before the tests run.
const (
	inmemoryWasm = "../../plugins/inmemory/inmemory.wasm"
	sqliteWasm   = "../../plugins/sqlite/sqlite.wasm"
)

// seq yields messages as a document reader does, one at a time.
func historyOf(ms ...abi.Message) func(func(abi.Message, error) bool) {
	return func(yield func(abi.Message, error) bool) {
		for _, m := range ms {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// Import writes a session's fields and its history, streamed slot by
// slot, into a fresh state of the target plugin and into the target
// store, in one commit. An existing session is never replaced without
// Force.
func ExampleImport() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	h, err := host.New(ctx, host.Config{}) // compiled plugins cached in the user cache directory
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(inmemoryWasm), host.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	sessions, err := store.NewDir(filepath.Join(dir, "sessions"))
	if err != nil {
		log.Fatal(err)
	}
	to := conversation.Target{Store: sessions, Plugins: map[string]*host.Plugin{"history": p}}

	fields := &session.Session{SessionID: "trip", Revision: 7}
	history := historyOf(
		abi.NewMessage(abi.RoleUser, "Book a table for two"),
		abi.NewMessage(abi.RoleAssistant, "Booked for 8 pm."),
	)
	s, err := conversation.Import(ctx, fields, []conversation.SlotHistory{{Key: "history", History: history}}, to, nil)
	if err != nil {
		log.Fatal(err)
	}
	msgs, _, err := p.List(ctx, s, "history", "", 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.Role, m.TextContent())
	}
	fmt.Println("revision", s.Revision)

	_, err = conversation.Import(ctx, fields, []conversation.SlotHistory{{Key: "history", History: historyOf()}}, to, nil)
	fmt.Println(errors.Is(err, conversation.ErrSessionExists))
	// Output:
	// user: Book a table for two
	// assistant: Booked for 8 pm.
	// revision 7
	// true
}
