package agent_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/session"
)

// One turn with the offline model (deterministic, no network) and a native
// history provider that keeps the conversation in the session itself. A
// run that succeeds commits: the session's revision goes up by one.
func Example() {
	ctx := context.Background()
	a, err := agent.New(agent.Config{
		Model:     offline.New(),
		Providers: []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history")}},
	})
	if err != nil {
		log.Fatal(err)
	}

	s := session.New()
	for _, text := range []string{"I like Italian food", "What food do I like?"} {
		res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s -> %s (revision %d)\n", text, res.Text(), s.Revision)
	}
	// Output:
	// I like Italian food -> Noted: you like Italian food. I'll remember that. (revision 1)
	// What food do I like? -> You told me you like Italian food. (revision 2)
}

// The history provider can be a WebAssembly plugin loaded by package host:
// Plugin.Provider binds it to a state key of the session. The model's tool
// calls and their results are among the run's messages, and are stored
// with the rest.
func ExampleAgent_Run() {
	ctx := context.Background()
	cache, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cache)
	h, err := host.New(ctx, host.Config{CacheDir: cache})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	// Built by `make plugins`.
	p, err := h.Load(ctx, host.File("../../plugins/inmemory/inmemory.wasm"), host.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}

	var tools []agent.Tool
	for _, t := range offline.Tools(nil) { // calculator and clock
		tools = append(tools, agent.Tool(t))
	}
	a, err := agent.New(agent.Config{
		Model:     offline.New(),
		Tools:     tools,
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
	})
	if err != nil {
		log.Fatal(err)
	}

	s := session.New()
	res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "What is 6*7?")}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range res.Messages {
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentFunctionCall:
				fmt.Printf("%s calls %s %s\n", m.Role, c.Name, c.Arguments)
			case abi.ContentText:
				fmt.Printf("%s: %s\n", m.Role, c.Text)
			}
		}
	}
	stored, _, err := p.List(ctx, s, "history", "", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored messages:", len(stored))
	// Output:
	// assistant calls calculator {"expression":"6*7"}
	// assistant: 6*7 = 42.
	// stored messages: 4
}

// A session is plain JSON: encode it after a run, decode it anywhere
// later, and a new agent continues the conversation. The offline model
// keeps nothing between calls, so it can answer the second question only
// from the history the session carried.
func Example_resume() {
	ctx := context.Background()
	newAgent := func() *agent.Agent {
		a, err := agent.New(agent.Config{
			Model:     offline.New(),
			Providers: []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history")}},
		})
		if err != nil {
			log.Fatal(err)
		}
		return a
	}
	say := func(a *agent.Agent, s *session.Session, text string) {
		res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Text())
	}

	s := session.New()
	say(newAgent(), s, "My name is Ada and I like chess")
	saved, err := session.Encode(s)
	if err != nil {
		log.Fatal(err)
	}

	// Later, perhaps in another process.
	resumed, err := session.Decode(saved)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed at revision", resumed.Revision, "same id:", resumed.SessionID == s.SessionID)
	say(newAgent(), resumed, "What do you know about me?")
	say(newAgent(), session.New(), "What do you know about me?")
	// Output:
	// Nice to meet you, Ada. Noted: you like chess. I'll remember that.
	// resumed at revision 1 same id: true
	// You told me that your name is Ada and you like chess.
	// You haven't told me anything about yourself yet.
}
