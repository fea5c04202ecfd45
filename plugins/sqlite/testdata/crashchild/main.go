// Command crashchild stores turns through the host and the sqlite plugin
// until it is killed, printing "ack <turn>" once each store has returned,
// i.e. committed. TestAtomicityUnderProcessKill runs and kills it; it is built without
// the race detector so that its start-up stays short.
//
// Usage: crashchild <plugin.wasm> <database> <session key> <run id>
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crashchild:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) != 4 {
		return fmt.Errorf("want 4 arguments, got %d", len(args))
	}
	wasm, db, key, runID := args[0], args[1], args[2], args[3]
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		return err
	}
	p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{
		Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})},
	})
	if err != nil {
		return err
	}
	state := json.RawMessage(fmt.Sprintf(`{"session_key":%q}`, key))
	facts := abi.SessionFacts{SessionID: "crash", StateKey: "history"}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	for turn := 0; ; turn++ {
		id := fmt.Sprintf("r%s-t%d", runID, turn)
		q, _ := json.Marshal(abi.NewMessage(abi.RoleUser, id+"-q"))
		a, _ := json.Marshal(abi.NewMessage(abi.RoleAssistant, id+"-a", strings.Repeat("x", 400)))
		if _, err := p.StoreState(ctx, facts, state, []json.RawMessage{q}, []json.RawMessage{a}); err != nil {
			return err
		}
		fmt.Fprintln(out, "ack", id)
		out.Flush()
	}
}
