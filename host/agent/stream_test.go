package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/session"
)

// streamTurn runs one turn through RunStream and returns its result (the
// last update, which must be the only one with Result set) and the text of
// its model updates.
func streamTurn(t *testing.T, a *agent.Agent, s *session.Session, q string, opts *agent.RunOptions) (*agent.RunResult, string, error) {
	t.Helper()
	var (
		res  *agent.RunResult
		text strings.Builder
	)
	for u, err := range a.RunStream(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, q)}, opts) {
		if err != nil {
			return nil, "", err
		}
		require.Nil(t, res, "an update after the result: %+v", u)
		text.WriteString(u.Text())
		res = u.Result
	}
	require.NotNil(t, res, "the stream ended without a result")
	return res, text.String(), nil
}

// TestRunStreamResult: for both OpenAI APIs against the strict fakes, per
// run and per service call, a streamed turn ends with the RunResult Run
// returns for the same turn (messages, iterations, usage, conversation,
// Terminated, Resumed), and a turn repeated with its run id streams the
// committed reply again, as text, with Replayed set.
func TestRunStreamResult(t *testing.T) {
	cases := []struct {
		name    string
		perCall bool
		// script is the fake's replies; the turn under test is "q2",
		// after a first turn "q1" that may fail.
		script    []openaitest.Reply
		terminate bool
		q1Fails   bool
	}{
		{name: "tool-then-text", script: []openaitest.Reply{
			openaitest.Text("hello"),
			openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}),
			openaitest.Text("it is noon"),
		}},
		{name: "terminated", terminate: true, script: []openaitest.Reply{
			openaitest.Text("hello"),
			openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}),
		}},
		{name: "resumed", perCall: true, q1Fails: true, script: []openaitest.Reply{
			openaitest.Calls(openaitest.ToolCall{ID: "c0", Name: "clock", Arguments: `{}`}),
			openaitest.Fail(500, "down"),
			openaitest.Text("it is noon"),
		}},
	}
	for _, api := range []string{"chat", "responses"} {
		for _, c := range cases {
			t.Run(api+"/"+c.name, func(t *testing.T) {
				// turn runs the script on a fresh fake and session and
				// returns the second turn's result, streamed or not.
				turn := func(stream bool) (*agent.RunResult, *agent.Agent, *session.Session, string) {
					srv := openaitest.NewServer(t)
					srv.Enqueue(c.script...)
					tool := clockTool()
					if c.terminate {
						tool.Func = func(ctx context.Context, _ json.RawMessage) (any, error) {
							agent.TerminateLoop(ctx)
							return "noon", nil
						}
					}
					a, err := agent.New(agent.Config{
						Model:                            modelClient(api, srv.URL),
						Tools:                            []agent.Tool{tool},
						Providers:                        []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history"), SkipLoad: api == "responses"}},
						RequirePerServiceCallPersistence: c.perCall,
					})
					require.NoError(t, err)
					s := session.New()
					_, err = a.Run(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, "q1")}, nil)
					if c.q1Fails {
						require.Error(t, err)
					} else {
						require.NoError(t, err)
					}
					opts := &agent.RunOptions{RunID: "r2"}
					if !stream {
						res, err := a.Run(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, "q2")}, opts)
						require.NoError(t, err)
						return res, a, s, ""
					}
					res, text, err := streamTurn(t, a, s, "q2", opts)
					require.NoError(t, err)
					return res, a, s, text
				}
				want, _, _, _ := turn(false)
				got, a, s, text := turn(true)

				assert.Equal(t, renderIDs(want.Messages), renderIDs(got.Messages), "messages")
				assert.Equal(t, want.Iterations, got.Iterations, "iterations")
				assert.Equal(t, want.Usage, got.Usage, "usage")
				assert.NotZero(t, got.Usage.TotalTokens, "usage")
				assert.Equal(t, want.ConversationID, got.ConversationID, "conversation")
				assert.Equal(t, c.terminate, got.Terminated, "terminated")
				assert.Equal(t, want.Resumed, got.Resumed, "resumed")
				assert.Equal(t, c.q1Fails, len(got.Resumed) > 0, "resumed")
				assert.False(t, got.Replayed)
				assert.Equal(t, got.Text(), text, "the text of the model updates")

				// The same run id and input again: nothing runs (the fake
				// has no reply left and would refuse), the committed reply
				// streams again.
				rev := s.Revision
				again, againText, err := streamTurn(t, a, s, "q2", &agent.RunOptions{RunID: "r2"})
				require.NoError(t, err)
				assert.True(t, again.Replayed, "replayed")
				assert.Equal(t, renderIDs(got.Messages), renderIDs(again.Messages), "the committed reply")
				assert.Equal(t, text, againText, "the committed reply streams as text")
				assert.Equal(t, rev, s.Revision, "a replay commits nothing")
			})
		}
	}
}

// TestRunUpdateText: the text of a model update is its text parts, and
// nothing else of any update.
func TestRunUpdateText(t *testing.T) {
	msg := abi.NewMessage(abi.RoleAssistant, "whole")
	cases := []struct {
		name string
		u    agent.RunUpdate
		want string
	}{
		{name: "text parts", u: agent.RunUpdate{Model: &model.Update{Contents: []abi.Content{abi.Text("a"), {Type: abi.ContentReasoning, Text: "think"}, abi.Text("b")}}}, want: "ab"},
		{name: "call", u: agent.RunUpdate{Model: &model.Update{Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: "c", Name: "clock"}}}}},
		{name: "complete message", u: agent.RunUpdate{Message: &msg}},
		{name: "result", u: agent.RunUpdate{Result: &agent.RunResult{Messages: []abi.Message{msg}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.u.Text(), fmt.Sprintf("%+v", c.u))
		})
	}
}
