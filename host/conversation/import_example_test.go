package conversation_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/portable"
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

// ImportSlots takes the slots one at a time, as a portable document read
// as a stream meets them: here a document written by another tool, whose
// slots are not in the order of their keys, imports in bounded memory.
func ExampleImportSlots() {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(inmemoryWasm), host.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	to := conversation.Target{Store: store.NewFile(filepath.Join(dir, "trip.json")),
		Plugins: map[string]*host.Plugin{"notes": p, "history": p}}

	doc := `{"format_version":"1.0","session":{"session_id":"trip","revision":3},"slots":[
{"key":"notes","plugin":"inmemory","stored_messages":[{"role":"user","contents":[{"type":"text","text":"window seat"}]}]},
{"key":"history","plugin":"inmemory","stored_messages":[{"role":"user","contents":[{"type":"text","text":"Book a table for two"}]}]}
],"totals":{"slots":2,"messages":2}}`
	r, err := portable.NewReader(strings.NewReader(doc), portable.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	slots := func(yield func(conversation.SlotHistory, error) bool) {
		for sl, err := range r.Slots() {
			var h conversation.SlotHistory
			if sl != nil {
				h = conversation.SlotHistory{Key: sl.Key, History: sl.Messages()}
			}
			if !yield(h, err) || err != nil {
				return
			}
		}
	}
	s, err := conversation.ImportSlots(ctx, r.Session(), slots, to, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"history", "notes"} {
		msgs, _, err := p.List(ctx, s, key, "", 10)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", key, msgs[0].TextContent())
	}
	// Output:
	// history: Book a table for two
	// notes: window seat
}
