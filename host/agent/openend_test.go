package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// storedMessages reads everything p stored under key for s, through its
// list export: what the storage holds, not what provide would serve.
func storedMessages(t *testing.T, p *host.Plugin, s *session.Session, key string) []abi.Message {
	t.Helper()
	var out []abi.Message
	cursor := ""
	for {
		page, next, err := p.List(context.Background(), s, key, cursor, 100)
		require.NoError(t, err)
		out = append(out, page...)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// requirePaired checks the rule a stored history keeps: each call id is
// called once and answered at most once, its result after its call.
func requirePaired(t *testing.T, msgs []abi.Message) {
	t.Helper()
	called := map[string]int{}
	answered := map[string]int{}
	for i, m := range msgs {
		for _, id := range m.CallIDs() {
			called[id]++
			require.Equal(t, 1, called[id], "call %s stored twice (message %d)", id, i)
		}
		for _, id := range m.ResultIDs() {
			answered[id]++
			require.Equal(t, 1, answered[id], "result of %s stored twice (message %d)", id, i)
			require.Equal(t, 1, called[id], "result of %s stored without its call before it (message %d)", id, i)
		}
	}
}

// TestOpenEndStoredOnce: a tool loop that a tool terminated, that reached
// MaxIterations with a call pending, or whose streaming consumer stopped at
// a tool's result, then a next turn. For Chat
// Completions (the provider loads) and Responses (the service keeps the
// conversation, the provider stores a copy), per run and per service
// call, with the in-memory and the SQLite plugin, the stored history holds
// each call once and each result once, after its call, and the strict
// fakes accept every request.
func TestOpenEndStoredOnce(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	inmemory, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/inmemory")), host.LoadOptions{})
	require.NoError(t, err)
	grant := sqlgrant.New(sqlgrant.Config{Path: filepath.Join(t.TempDir(), "history.db")})
	sqlite, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/sqlite")), host.LoadOptions{Grants: []host.Grant{grant}})
	require.NoError(t, err)
	plugins := []struct {
		name string
		p    *host.Plugin
	}{{"inmemory", inmemory}, {"sqlite", sqlite}}

	const paired = "user:q1 call:c1 result:c1 user:q2 asst:ok"
	for _, api := range []string{"chat", "responses"} {
		for _, perCall := range []bool{false, true} {
			for _, end := range []string{"terminated", "max-iterations", "stream-stopped"} {
				// The stored history after the next turn. Only a
				// per-run Chat Completions run at the iteration bound
				// drops the unanswered call: nothing holds it, and the
				// next turn does not answer it.
				want := paired
				if api == "chat" && !perCall && end == "max-iterations" {
					want = "user:q1 user:q2 asst:ok"
				}
				for _, pl := range plugins {
					mode := "per-run"
					if perCall {
						mode = "per-call"
					}
					t.Run(fmt.Sprintf("%s/%s/%s/%s", api, mode, end, pl.name), func(t *testing.T) {
						srv := openaitest.NewServer(t)
						tool := clockTool()
						cfg := agent.Config{
							Model:                            modelClient(api, srv.URL),
							Tools:                            []agent.Tool{tool},
							Providers:                        []agent.ProviderConfig{{Provider: pl.p.Provider("history"), SkipLoad: api == "responses"}},
							RequirePerServiceCallPersistence: perCall,
						}
						switch end {
						case "max-iterations":
							cfg.MaxIterations = 1
						case "terminated":
							cfg.Tools[0].Func = func(ctx context.Context, args json.RawMessage) (any, error) {
								agent.TerminateLoop(ctx)
								return tool.Func(ctx, args)
							}
						}
						a, err := agent.New(cfg)
						require.NoError(t, err)
						s := session.New()

						srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}))
						q1 := []abi.Message{abi.NewMessage(abi.RoleUser, "q1")}
						if end == "stream-stopped" {
							// The consumer stops at the tool's result, before
							// the call that would carry it.
							for u, err := range a.RunStream(ctx, s, q1, nil) {
								require.NoError(t, err)
								if u.Message != nil && u.Message.Role == abi.RoleTool {
									break
								}
							}
						} else {
							_, err = a.Run(ctx, s, q1, nil)
							require.NoError(t, err)
						}
						requirePaired(t, storedMessages(t, pl.p, s, "history"))

						srv.Enqueue(openaitest.Text("ok"))
						_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q2")}, nil)
						require.NoError(t, err, "the next turn was refused")
						stored := storedMessages(t, pl.p, s, "history")
						assert.Equal(t, want, renderIDs(stored), "stored after the next turn")
						requirePaired(t, stored)
						assert.Empty(t, s.PendingToolCalls, "open calls after the next turn")

						// And the conversation goes on.
						srv.Enqueue(openaitest.Text("more"))
						_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q3")}, nil)
						require.NoError(t, err, "the turn after the next one was refused")
						stored = storedMessages(t, pl.p, s, "history")
						assert.Equal(t, want+" user:q3 asst:more", renderIDs(stored))
						requirePaired(t, stored)
					})
				}
			}
		}
	}
}
