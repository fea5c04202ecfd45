package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent/model/openai"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

func replayAgent(t *testing.T, srv *openaitest.Server, p *agent.MemoryProvider, perCall bool, terminate bool) *agent.Agent {
	t.Helper()
	tool := agent.Tool{
		Name:       "lookup",
		Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Func: func(ctx context.Context, _ json.RawMessage) (any, error) {
			if terminate {
				agent.TerminateLoop(ctx)
			}
			return "42", nil
		},
	}
	a, err := agent.New(agent.Config{
		Model:                            openai.NewChat(openai.Options{BaseURL: srv.URL, APIKey: "sk-test", Model: "test-model"}),
		Tools:                            []agent.Tool{tool},
		Providers:                        []agent.ProviderConfig{{Provider: p}},
		RequirePerServiceCallPersistence: perCall,
	})
	require.NoError(t, err)
	return a
}

func runTurn(ctx context.Context, a *agent.Agent, s *session.Session, stream bool, text string) error {
	in := []abi.Message{abi.NewMessage(abi.RoleUser, text)}
	if !stream {
		_, err := a.Run(ctx, s, in, nil)
		return err
	}
	for _, err := range a.RunStream(ctx, s, in, nil) {
		if err != nil {
			return err
		}
	}
	return nil
}

// The stored history of a terminated tool loop, and of a streamed tool
// turn, is replayed to a strict Chat Completions server on the next turn
// and accepted, in both persistence modes.
func TestAgentResumeReplaysToStrictServer(t *testing.T) {
	tests := []struct {
		name      string
		terminate bool
		first     []openaitest.Reply
	}{
		{"terminated tool loop", true, []openaitest.Reply{openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{"q":"x"}`})}},
		{"tool turn", false, []openaitest.Reply{
			{Text: "let me look", ToolCalls: []openaitest.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"x"}`}, {ID: "c2", Name: "lookup", Arguments: `{"q":"y"}`}}},
			openaitest.Text("it is 42"),
		}},
	}
	for _, tc := range tests {
		for _, perCall := range []bool{false, true} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/per-call=%v/stream=%v", tc.name, perCall, stream), func(t *testing.T) {
					ctx := context.Background()
					srv := openaitest.NewServer(t)
					p := agent.NewMemoryProvider("history")
					a := replayAgent(t, srv, p, perCall, tc.terminate)
					s := session.New()
					srv.Enqueue(tc.first...)
					require.NoError(t, runTurn(ctx, a, s, stream, "first"))
					srv.Enqueue(openaitest.Text("resumed"))
					require.NoError(t, runTurn(ctx, a, s, stream, "again"), "resume rejected")
					for i, r := range srv.Requests() {
						assert.False(t, r.Has("store"), "request %d sent store although it was unset", i)
						assert.False(t, r.Contains("wasmhist:"), "request %d carries the sentinel", i)
					}
					msgs, err := p.Messages(s)
					require.NoError(t, err)
					if !perCall || !tc.terminate {
						// Per-run storage and complete turns are replayable
						// as they are.
						require.NoError(t, openaitest.ValidateHistory(msgs), "stored history")
					}
					require.Equal(t, "resumed", msgs[len(msgs)-1].TextContent(), "last stored message")
				})
			}
		}
	}
}

// On the Responses API the instructions travel in the instructions
// parameter on every call, and never as an input item: a continuation
// (previous_response_id) would otherwise add one system item to the
// stored conversation per call.
func TestAgentResponsesSendsInstructionsAsParameter(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.NewServer(t)
	a, err := agent.New(agent.Config{
		Model:        openai.NewResponses(openai.Options{BaseURL: srv.URL, APIKey: "sk-test", Model: "test-model"}),
		Instructions: "be brief",
		Tools: []agent.Tool{{Name: "lookup", Func: func(context.Context, json.RawMessage) (any, error) {
			return "42", nil
		}}},
		RequirePerServiceCallPersistence: true,
	})
	require.NoError(t, err)
	s := session.New()
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{}`}), openaitest.Text("it is 42"))
	require.NoError(t, runTurn(ctx, a, s, false, "first"))
	srv.Enqueue(openaitest.Text("again"))
	require.NoError(t, runTurn(ctx, a, s, false, "second"))

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		require.NotNil(t, r.Responses, "request %d", i)
		assert.Equal(t, "be brief", r.Responses.Instructions, "request %d: instructions", i)
		items, err := r.Responses.Items()
		require.NoError(t, err)
		for j, it := range items {
			assert.NotEqual(t, "system", it.Role, "request %d item %d: instructions sent as an input item", i, j)
		}
		if i > 0 {
			assert.NotEmpty(t, r.Responses.PreviousResponseID, "request %d continues", i)
		}
	}
}

// A tool result's JSON reaches the model byte for byte as it was first
// sent after the session went through a file (SessionFile writes compact
// JSON) and the wasm in-memory plugin: key order, number spelling and
// escapes included.
func TestToolResultReplaysByteIdenticalAfterSaveLoad(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	plug, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/inmemory")), host.LoadOptions{})
	require.NoError(t, err)
	srv := openaitest.NewServer(t)
	result := json.RawMessage(`{"z":1,"a":[1,2.50,1e3],"s":"é \u00e9 <tag>","n":null}`)
	a, err := agent.New(agent.Config{
		Model:     openai.NewChat(openai.Options{BaseURL: srv.URL, APIKey: "sk-test", Model: "test-model"}),
		Tools:     []agent.Tool{{Name: "lookup", Func: func(context.Context, json.RawMessage) (any, error) { return result, nil }}},
		Providers: []agent.ProviderConfig{{Provider: plug.Provider("history")}},
	})
	require.NoError(t, err)
	file := store.NewFile(filepath.Join(t.TempDir(), "s.json"))
	s := session.New()
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "lookup", Arguments: `{}`}), openaitest.Text("ok"))
	require.NoError(t, runTurn(ctx, a, s, false, "first"))
	require.NoError(t, file.Save(ctx, s))
	loaded, err := file.Load(ctx)
	require.NoError(t, err)
	srv.Enqueue(openaitest.Text("again"))
	require.NoError(t, runTurn(ctx, a, loaded, false, "second"))

	toolContent := func(r openaitest.Request) json.RawMessage {
		for _, m := range r.Chat.Messages {
			if m.Role == "tool" {
				return m.Content
			}
		}
		t.Fatalf("no tool message sent")
		return nil
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	first, replayed := toolContent(reqs[1]), toolContent(reqs[2])
	require.Equal(t, string(first), string(replayed), "the tool result changed on the way through the file")
	var sent string
	require.NoError(t, json.Unmarshal(first, &sent))
	want, err := json.Marshal(result)
	require.NoError(t, err)
	require.Equal(t, string(want), sent, "the result as the tool's JSON encoding gave it")
}
