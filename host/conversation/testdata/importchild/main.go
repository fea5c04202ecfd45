// Command importchild imports one conversation of many messages into the
// sqlite plugin with the session store in the same SQLite file, for
// TestImportUnderProcessKill, which kills it at random points. It prints
// "started" once the import begins and "done" when it returned.
//
//	importchild PLUGIN.wasm DB ID MESSAGES
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
)

func main() {
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "importchild:", err)
		os.Exit(1)
	}
}

func run(wasm, db, id, count string) error {
	ctx := context.Background()
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	if err != nil {
		return err
	}
	st, err := sqlitestore.Open(db)
	if err != nil {
		return err
	}
	defer st.Close()
	history := func(yield func(abi.Message, error) bool) {
		for i := range n / 4 {
			q := fmt.Sprint("q", i)
			args, _ := json.Marshal(map[string]string{"q": q})
			for _, m := range []abi.Message{
				abi.NewMessage(abi.RoleUser, q),
				{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c-" + q, Name: "lookup", Arguments: args}}},
				{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: "c-" + q, Result: json.RawMessage(`{"found":"x"}`)}}},
				abi.NewMessage(abi.RoleAssistant, "answer to "+q),
			} {
				if !yield(m, nil) {
					return
				}
			}
		}
	}
	fmt.Println("started")
	to := conversation.Target{Store: st, Plugins: map[string]*host.Plugin{"history": p}}
	if _, err := conversation.Import(ctx, &session.Session{SessionID: id}, []conversation.SlotHistory{{Key: "history", History: history}}, to, nil); err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}
