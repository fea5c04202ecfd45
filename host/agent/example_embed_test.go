package agent_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/store"
)

// A service keys conversations by user: NewSessions configures an agent
// whose Saver is a store, and Sessions loads the user's session
// from the agent's store (or starts one), runs one turn at a time per
// user, and commits through the store. RunUpdate.Text is the reply as it
// streams; the stream's last update is the run's result.
func ExampleSessions() {
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
	users, err := agent.NewSessions(agent.Config{
		Model:     offline.New(),
		Providers: []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history")}},
		Saver:     sessions,
	})
	if err != nil {
		log.Fatal(err)
	}
	in := []abi.Message{abi.NewMessage(abi.RoleUser, "I like tea")}
	opts := &agent.RunOptions{RunID: "ann-1"} // the client's idempotency key
	for range 2 {                             // the second attempt replays the first
		for u, err := range users.RunStream(ctx, "ann", in, opts) {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Print(u.Text())
			if u.Result != nil {
				fmt.Printf(" [replayed %v]\n", u.Result.Replayed)
			}
		}
	}
	for m, err := range users.History(ctx, "ann") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", m.Role, m.TextContent())
	}
	// Output:
	// Noted: you like tea. I'll remember that. [replayed false]
	// Noted: you like tea. I'll remember that. [replayed true]
	// user: I like tea
	// assistant: Noted: you like tea. I'll remember that.
}

// A tool defined by a Go function: the JSON Schema the model sees comes
// from the argument type, and the function gets the arguments decoded.
func ExampleNewTool() {
	type addArgs struct {
		A int `json:"a" jsonschema:"description=the first term"`
		B int `json:"b"`
	}
	add := agent.NewTool("add", "adds two integers", func(_ context.Context, args addArgs) (any, error) {
		return args.A + args.B, nil
	})
	fmt.Println(string(add.Parameters))
	out, err := add.Func(context.Background(), []byte(`{"a":2,"b":40}`))
	fmt.Println(out, err)
	// Output:
	// {"properties":{"a":{"type":"integer","description":"the first term"},"b":{"type":"integer"}},"additionalProperties":false,"type":"object","required":["a","b"]}
	// 42 <nil>
}
