// Command crashresume shows what per-service-call persistence is for: a
// process that dies in the middle of a tool loop keeps the model calls
// that completed.
//
// For each persistence mode it starts a child process (itself) that asks
// the offline model a question needing the calculator, and kills the child
// while the tool runs, after the first model call. Then, in this process,
// it opens the session file the child was writing: with the default
// per-run persistence nothing was committed and the turn is lost; with
// per-service-call persistence the question and the model's tool call are
// there, and a new turn continues from them.
//
//	make plugins
//	go run ./examples/crashresume -plugin plugins/inmemory/inmemory.wasm
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
)

// The child learns its role from the environment rather than from flags,
// so that any binary embedding main (a test binary too) can be the child.
const (
	childEnv  = "CRASHRESUME_CHILD" // "per-run" or "per-service-call"
	pluginEnv = "CRASHRESUME_PLUGIN"
	dirEnv    = "CRASHRESUME_DIR"
)

const (
	sessionID = "crash"
	stateKey  = "history"
	// toolStarted is the line the child prints when the tool runs: the
	// moment to kill it.
	toolStarted = "tool started"
)

func main() {
	var err error
	if mode := os.Getenv(childEnv); mode != "" {
		err = child(context.Background(), mode, os.Getenv(pluginEnv), os.Getenv(dirEnv))
	} else {
		plugin := flag.String("plugin", filepath.Join("plugins", "inmemory", "inmemory.wasm"), "history plugin `PATH.wasm` (run `make plugins` first)")
		flag.Parse()
		err = run(context.Background(), *plugin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashresume:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, pluginPath string) error {
	pluginPath, err := filepath.Abs(pluginPath)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "wasmhist-crashresume-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, mode := range []string{"per-run", "per-service-call"} {
		fmt.Printf("== %s persistence\n", mode)
		sessions := filepath.Join(dir, mode)
		if err := crashChild(ctx, mode, pluginPath, sessions); err != nil {
			return err
		}
		if err := resume(ctx, pluginPath, sessions); err != nil {
			return err
		}
	}
	return nil
}

// crashChild runs the child and kills it as soon as it says the tool runs.
func crashChild(ctx context.Context, mode, pluginPath, sessions string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), childEnv+"="+mode, pluginEnv+"="+pluginPath, dirEnv+"="+sessions)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		fmt.Printf("  child: %s\n", sc.Text())
		if sc.Text() == toolStarted {
			// SIGKILL: no deferred function, no cleanup, as in a crash.
			if err := cmd.Process.Kill(); err != nil {
				return err
			}
			killed = true
			break
		}
	}
	err = cmd.Wait()
	if !killed {
		return fmt.Errorf("the child ended before its tool ran: %v", err)
	}
	fmt.Println("  killed the child while its tool ran")
	return nil
}

// child runs one turn that the parent kills during the tool call.
func child(ctx context.Context, mode, pluginPath, sessions string) error {
	h, p, err := load(ctx, pluginPath)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	dir, err := store.NewDir(sessions)
	if err != nil {
		return err
	}
	calculator := agent.Tool(offline.Calculator())
	calculator.Func = func(ctx context.Context, _ json.RawMessage) (any, error) {
		fmt.Println(toolStarted)
		<-ctx.Done() // a slow tool: the process dies before it returns
		return nil, ctx.Err()
	}
	agent, err := agent.New(agent.Config{
		Model:                            offline.New(),
		Tools:                            []agent.Tool{calculator},
		Providers:                        []agent.ProviderConfig{{Provider: p.Provider(stateKey)}},
		RequirePerServiceCallPersistence: mode == "per-service-call",
		Saver:                            dir,
	})
	if err != nil {
		return err
	}
	s := session.New()
	s.SessionID = sessionID
	fmt.Println("user: What is 6*7?")
	_, err = agent.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "What is 6*7?")}, nil)
	return err
}

// resume opens what the killed child committed and, if anything was,
// continues the conversation in this process.
func resume(ctx context.Context, pluginPath, sessions string) error {
	dir, err := store.NewDir(sessions)
	if err != nil {
		return err
	}
	s, err := dir.Load(ctx, sessionID)
	if errors.Is(err, session.ErrNotFound) {
		fmt.Println("  resume: no session was saved; the whole turn is lost")
		return nil
	}
	if err != nil {
		return err
	}
	h, p, err := load(ctx, pluginPath)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	if err := printStored(ctx, p, s, "resume: the session file is at"); err != nil {
		return err
	}

	var tools []agent.Tool
	for _, t := range offline.Tools(nil) {
		tools = append(tools, agent.Tool(t))
	}
	agent, err := agent.New(agent.Config{
		Model:                            offline.New(),
		Tools:                            tools,
		Providers:                        []agent.ProviderConfig{{Provider: p.Provider(stateKey)}},
		RequirePerServiceCallPersistence: true,
		Saver:                            dir,
	})
	if err != nil {
		return err
	}
	// The call the child never answered is open in the session; the new
	// turn answers it first (the calculator is safe to repeat, so it runs
	// again) and then asks again.
	fmt.Println("  user: Try again: what is 6*7?")
	res, err := agent.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "Try again: what is 6*7?")}, nil)
	if err != nil {
		return err
	}
	fmt.Printf("  assistant: %s\n", res.Text())
	return printStored(ctx, p, s, "now at")
}

func load(ctx context.Context, pluginPath string) (*host.Host, *host.Plugin, error) {
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		return nil, nil, err
	}
	p, err := h.Load(ctx, host.File(pluginPath), host.LoadOptions{})
	if err != nil {
		h.Close(ctx)
		return nil, nil, fmt.Errorf("%w (run `make plugins` first)", err)
	}
	return h, p, nil
}

// printStored lists what the plugin holds for the session, compactly.
func printStored(ctx context.Context, p *host.Plugin, s *session.Session, label string) error {
	msgs, _, err := p.List(ctx, s, stateKey, "", 100)
	if err != nil {
		return err
	}
	var parts []string
	for _, m := range msgs {
		switch {
		case len(m.CallIDs()) > 0:
			parts = append(parts, "call")
		case len(m.ResultIDs()) > 0:
			parts = append(parts, "result")
		case m.Role == abi.RoleUser:
			parts = append(parts, "user")
		default:
			parts = append(parts, "answer")
		}
	}
	fmt.Printf("  %s revision %d, stored: %s\n", label, s.Revision, strings.Join(parts, " "))
	return nil
}
