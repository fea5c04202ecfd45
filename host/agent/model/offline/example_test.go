package offline_test

import (
	"context"
	"fmt"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
)

// The offline model remembers only what the request carries: the same
// question answers differently with and without the earlier turn.
func Example_remembering() {
	ctx := context.Background()
	m := offline.New()

	first := []abi.Message{abi.NewMessage(abi.RoleUser, "I like Italian food")}
	res, _ := m.Complete(ctx, model.Request{Messages: first})
	fmt.Println(res.Messages[0].TextContent())

	question := abi.NewMessage(abi.RoleUser, "What food do I like?")
	history := append(first, res.Messages[0], question)
	res, _ = m.Complete(ctx, model.Request{Messages: history})
	fmt.Println(res.Messages[0].TextContent())

	res, _ = m.Complete(ctx, model.Request{Messages: []abi.Message{question}})
	fmt.Println(res.Messages[0].TextContent())
	// Output:
	// Noted: you like Italian food. I'll remember that.
	// You told me you like Italian food.
	// You haven't told me what food you like.
}
