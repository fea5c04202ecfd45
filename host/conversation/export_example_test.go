package conversation_test

import (
	"context"
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
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
)

// Export writes a session and the history its plugin keeps, here in an
// SQLite database, as one portable document: plain JSON that any
// wasmhist imports into any plugin and store (conversation.Import).
func ExampleExport() {
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
	p, err := h.Load(ctx, host.File(sqliteWasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "chat.db")})}})
	if err != nil {
		log.Fatal(err)
	}
	plugins := map[string]*host.Plugin{"history": p}
	s, err := conversation.Import(ctx, &session.Session{SessionID: "trip"}, []conversation.SlotHistory{{Key: "history", History: historyOf(
		abi.NewMessage(abi.RoleUser, "Book a table for two"),
		abi.NewMessage(abi.RoleAssistant, "Booked for 8 pm."),
	)}}, conversation.Target{Store: store.NewFile(filepath.Join(dir, "trip.json")), Plugins: plugins}, nil)
	if err != nil {
		log.Fatal(err)
	}

	var doc strings.Builder
	if _, err := conversation.Export(ctx, s, plugins, &doc); err != nil {
		log.Fatal(err)
	}
	r, err := portable.NewReader(strings.NewReader(doc.String()), portable.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("session", r.Session().SessionID, "revision", r.Session().Revision)
	for slot, err := range r.Slots() {
		if err != nil {
			log.Fatal(err)
		}
		for m, err := range slot.Messages() {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%s (%s) %s: %s\n", slot.Key, slot.Plugin, m.Role, m.TextContent())
		}
	}
	// Output:
	// session trip revision 1
	// history (sqlite) user: Book a table for two
	// history (sqlite) assistant: Booked for 8 pm.
}
