package conversation_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
)

// exampleSQLite loads the sqlite plugin on the SQLite file db and opens a
// session store on the same file.
func exampleSQLite(ctx context.Context, h *host.Host, db string) (*host.Plugin, *sqlitestore.Store) {
	p, err := h.Load(ctx, host.File(sqliteWasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlitestore.Open(db)
	if err != nil {
		log.Fatal(err)
	}
	return p, st
}

// importOne stores a session with one exchange through Import.
func importOne(ctx context.Context, id, text string, p *host.Plugin, st store.Saver) *session.Session {
	history := historyOf(abi.NewMessage(abi.RoleUser, text), abi.NewMessage(abi.RoleAssistant, "Noted."))
	s, err := conversation.Import(ctx, &session.Session{SessionID: id}, []conversation.SlotHistory{{Key: "history", History: history}},
		conversation.Target{Store: st, Plugins: map[string]*host.Plugin{"history": p}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// Erase clears every slot's rows through its plugin and the host's
// journal rows, in one transaction per database, then deletes the session
// from its store, and says what it removed.
func ExampleErase() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	p, st := exampleSQLite(ctx, h, filepath.Join(dir, "chat.db"))
	defer st.Close()
	s := importOne(ctx, "trip", "Book a table for two", p, st)

	e, err := conversation.Erase(ctx, s, map[string]*host.Plugin{"history": p}, st, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, sl := range e.Slots {
		fmt.Printf("cleared slot %s of session %s (plugin %s)\n", sl.Key, e.SessionID, sl.Plugin)
	}
	_, err = st.Load(ctx, "trip")
	fmt.Println(err != nil)
	// Output:
	// cleared slot history of session trip (plugin sqlite)
	// true
}

// Migrate copies every session of one store with its history into
// another store and plugin: here from SQLite to another SQLite file (to
// PostgreSQL, give the destination a pgstore and a plugin granted
// pggrant). Running it again changes nothing.
func ExampleMigrate() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	oldP, oldSt := exampleSQLite(ctx, h, filepath.Join(dir, "old.db"))
	defer oldSt.Close()
	newP, newSt := exampleSQLite(ctx, h, filepath.Join(dir, "new.db"))
	defer newSt.Close()
	importOne(ctx, "a", "Book a table", oldP, oldSt)
	importOne(ctx, "b", "Call a taxi", oldP, oldSt)

	from := conversation.Source{Store: oldSt, Plugins: conversation.Plugins{"history": oldP}}
	to := conversation.Destination{Store: newSt, Plugins: conversation.Plugins{"history": newP}}
	for range 2 {
		done, err := conversation.Migrate(ctx, from, to, nil)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range done {
			fmt.Println(m.SessionID, m.Outcome, m.Messages)
		}
	}
	// Output:
	// a copied 2
	// b copied 2
	// a unchanged 0
	// b unchanged 0
}

// Prune erases the sessions last committed before a time, with their
// history.
func ExamplePrune() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	p, st := exampleSQLite(ctx, h, filepath.Join(dir, "chat.db"))
	defer st.Close()
	importOne(ctx, "old", "Book a table", p, st)
	cutoff := time.Now()
	importOne(ctx, "new", "Call a taxi", p, st)

	erased, err := conversation.Prune(ctx, st, cutoff, conversation.Plugins{"history": p})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range erased {
		fmt.Println("erased", e.SessionID)
	}
	left, err := st.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left", left[0].SessionID)
	// Output:
	// erased old
	// left new
}
