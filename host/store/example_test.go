package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// Config.Saver is given every session the agent commits, before the
// caller's session changes. A Dir refuses a save that would lose
// someone else's update: of two copies at one revision, only the first to
// commit is saved.
func ExampleDir() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sessions, err := store.NewDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	a, err := agent.New(agent.Config{
		Model:     offline.New(),
		Providers: []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history")}},
		Saver:     sessions,
	})
	if err != nil {
		log.Fatal(err)
	}

	s := session.New()
	stale := s.Clone()
	if _, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "I like tea")}, nil); err != nil {
		log.Fatal(err)
	}
	loaded, err := sessions.Load(ctx, s.SessionID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored revision", loaded.Revision)

	_, err = a.Run(ctx, stale, []abi.Message{abi.NewMessage(abi.RoleUser, "I like coffee")}, nil)
	fmt.Println(errors.Is(err, session.ErrStaleRevision), "revision", stale.Revision)
	// Output:
	// stored revision 1
	// true revision 0
}
