// Command embed shows the host embedded in a Go program: it loads a history
// plugin, runs agent turns with the offline model, saves the session as
// JSON, and restores it in a fresh host (as another process would) that
// remembers the conversation.
//
//	make plugins
//	go run ./examples/embed -plugin plugins/inmemory/inmemory.wasm
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
)

func main() {
	plugin := flag.String("plugin", filepath.Join("plugins", "inmemory", "inmemory.wasm"), "history plugin `PATH.wasm` (run `make plugins` first)")
	flag.Parse()
	if err := run(context.Background(), *plugin); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, pluginPath string) error {
	dir, err := os.MkdirTemp("", "wasmhist-embed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sessionFile := filepath.Join(dir, "session.json")

	// First "process": a new session, two turns, then the session is
	// written out as plain JSON.
	saved, err := func() ([]byte, error) {
		agent, done, err := newAgent(ctx, pluginPath)
		if err != nil {
			return nil, err
		}
		defer done()
		s := session.New()
		for _, q := range []string{"I like Italian food", "What is 6*7?"} {
			if err := turn(ctx, agent, s, q); err != nil {
				return nil, err
			}
		}
		// A session is data: no plugin, agent or factory is needed to
		// store it or to read it back.
		return session.Encode(s)
	}()
	if err != nil {
		return err
	}
	if err := os.WriteFile(sessionFile, saved, 0o600); err != nil {
		return err
	}
	fmt.Printf("saved the session: %d bytes of JSON\n", len(saved))

	// Second "process": a fresh host and agent restore the session from
	// the file and continue the conversation.
	b, err := os.ReadFile(sessionFile)
	if err != nil {
		return err
	}
	s, err := session.Decode(b) // validated against schemas/session.json
	if err != nil {
		return err
	}
	fmt.Printf("restored the session at revision %d\n", s.Revision)
	agent, done, err := newAgent(ctx, pluginPath)
	if err != nil {
		return err
	}
	defer done()
	return turn(ctx, agent, s, "What food do I like?")
}

// newAgent starts a host, loads the plugin and configures an agent whose
// history the plugin keeps under the state key "history".
func newAgent(ctx context.Context, pluginPath string) (*agent.Agent, func(), error) {
	h, err := host.New(ctx, host.Config{}) // the zero Config works
	if err != nil {
		return nil, nil, err
	}
	done := func() { h.Close(context.Background()) }
	p, err := h.Load(ctx, host.File(pluginPath), host.LoadOptions{})
	if err != nil {
		done()
		return nil, nil, fmt.Errorf("%w (run `make plugins` first)", err)
	}
	fmt.Printf("loaded plugin %s %s\n", p.Info().Name, p.Info().Version)

	var tools []agent.Tool
	for _, t := range offline.Tools(nil) {
		tools = append(tools, agent.Tool(t))
	}
	agent, err := agent.New(agent.Config{
		Model:     offline.New(),
		Tools:     tools,
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
	})
	if err != nil {
		done()
		return nil, nil, err
	}
	return agent, done, nil
}

// turn runs one user message and prints the tool calls and the reply.
func turn(ctx context.Context, agent *agent.Agent, s *session.Session, text string) error {
	fmt.Printf("user: %s\n", text)
	res, err := agent.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
	if err != nil {
		return err
	}
	for _, m := range res.Messages {
		for _, c := range m.Contents {
			if c.Type == abi.ContentFunctionCall {
				fmt.Printf("  tool call: %s %s\n", c.Name, c.Arguments)
			}
		}
	}
	fmt.Printf("assistant: %s\n", res.Text())
	fmt.Printf("  (session revision %d)\n", s.Revision)
	return nil
}
