package conversation_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
)

// Fork starts a new session from the first turns of another: here from
// the first of two, in the same database plugin and the same store. The
// branch gets rows of its own, so continuing it never touches its parent.
func ExampleFork() {
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
	db := filepath.Join(dir, "chat.db")
	p, err := h.Load(ctx, host.File(sqliteWasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	if err != nil {
		log.Fatal(err)
	}
	sessions, err := sqlitestore.Open(db)
	if err != nil {
		log.Fatal(err)
	}
	defer sessions.Close()
	plugins := map[string]*host.Plugin{"history": p}
	to := conversation.Target{Store: sessions, Plugins: plugins}

	// A parent of two turns (an agent run stores them the same way).
	parent, err := conversation.Import(ctx, &session.Session{SessionID: "parent"}, []conversation.SlotHistory{{Key: "history", History: historyOf(
		abi.NewMessage(abi.RoleUser, "Plan a trip to Rome"),
		abi.NewMessage(abi.RoleAssistant, "Three days: Colosseum, Vatican, Trastevere."),
		abi.NewMessage(abi.RoleUser, "Make it Florence instead"),
		abi.NewMessage(abi.RoleAssistant, "Three days: Uffizi, Duomo, Oltrarno."),
	)}}, to, nil)
	if err != nil {
		log.Fatal(err)
	}

	branch, err := conversation.Fork(ctx, parent, plugins, 1, to, "rome-only")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range []*session.Session{parent, branch} {
		msgs, _, err := p.List(ctx, s, "history", "", 10)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d messages, last %q\n", s.SessionID, len(msgs), msgs[len(msgs)-1].TextContent())
	}
	fmt.Println("own rows:", string(branch.State["history"].Data) != string(parent.State["history"].Data))
	// Output:
	// parent: 4 messages, last "Three days: Uffizi, Duomo, Oltrarno."
	// rome-only: 2 messages, last "Three days: Colosseum, Vatican, Trastevere."
	// own rows: true
}
