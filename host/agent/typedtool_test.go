package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/session"
)

type forecastArgs struct {
	City string `json:"city" jsonschema:"description=the city in English"`
	Days int    `json:"days" jsonschema:"minimum=1,maximum=7"`
	Unit string `json:"unit,omitempty" jsonschema:"enum=C,enum=F"`
}

// TestNewTool: against the strict fakes of both APIs, a tool defined by a
// Go function sends the schema derived from its argument type (required
// fields, no other property, the tags' constraints) and gets the model's
// arguments decoded; arguments that break the schema reach the model as
// the call's error and never the function.
func TestNewTool(t *testing.T) {
	cases := []struct {
		name      string
		arguments string
		want      *forecastArgs
		wantError string
	}{
		{name: "valid", arguments: `{"city":"Paris","days":2,"unit":"C"}`, want: &forecastArgs{City: "Paris", Days: 2, Unit: "C"}},
		{name: "optional field left out", arguments: `{"city":"Oslo","days":7}`, want: &forecastArgs{City: "Oslo", Days: 7}},
		{name: "required field missing", arguments: `{"city":"Paris"}`, wantError: "days"},
		{name: "out of range", arguments: `{"city":"Paris","days":9}`, wantError: "maximum"},
		{name: "unknown property", arguments: `{"city":"Paris","days":1,"country":"FR"}`, wantError: "country"},
	}
	for _, api := range []string{"chat", "responses"} {
		for _, c := range cases {
			t.Run(api+"/"+c.name, func(t *testing.T) {
				var (
					mu  sync.Mutex
					got []forecastArgs
				)
				tool := agent.NewTool("forecast", "the weather", func(_ context.Context, args forecastArgs) (any, error) {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, args)
					return map[string]string{"sky": "clear"}, nil
				})
				srv := openaitest.NewServer(t)
				srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "forecast", Arguments: c.arguments}), openaitest.Text("clear"))
				a, err := agent.New(agent.Config{
					Model:     modelClient(api, srv.URL),
					Tools:     []agent.Tool{tool},
					Providers: []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history"), SkipLoad: api == "responses"}},
				})
				require.NoError(t, err)
				res, err := a.Run(context.Background(), session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "weather?")}, nil)
				require.NoError(t, err)
				assert.Equal(t, "clear", res.Text())

				tools, ok := srv.Requests()[0].Field("tools")
				require.True(t, ok)
				var sent []map[string]any
				require.NoError(t, json.Unmarshal(tools, &sent))
				require.Len(t, sent, 1)
				params := sent[0]["parameters"]
				if fn, ok := sent[0]["function"].(map[string]any); ok { // chat nests it
					params = fn["parameters"]
				}
				p := params.(map[string]any)
				assert.Equal(t, "object", p["type"])
				assert.Equal(t, false, p["additionalProperties"])
				assert.ElementsMatch(t, []any{"city", "days"}, p["required"])
				assert.Equal(t, "the city in English", p["properties"].(map[string]any)["city"].(map[string]any)["description"])

				var result abi.Content
				for _, m := range res.Messages {
					for _, c := range m.Contents {
						if c.Type == abi.ContentFunctionResult {
							result = c
						}
					}
				}
				if c.want != nil {
					assert.Equal(t, []forecastArgs{*c.want}, got)
					assert.JSONEq(t, `{"sky":"clear"}`, string(result.Result))
					return
				}
				assert.Empty(t, got, "the function ran with arguments that break its schema")
				assert.Contains(t, result.Error, c.wantError)
			})
		}
	}
}

// TestNewToolNeedsAStruct: arguments are a JSON object, so the argument
// type must be a struct (or a pointer to one).
func TestNewToolNeedsAStruct(t *testing.T) {
	fn := func(context.Context, *forecastArgs) (any, error) { return nil, nil }
	assert.NotPanics(t, func() { agent.NewTool("ok", "", fn) })
	assert.PanicsWithValue(t, `agent: NewTool "bad": argument type string is not a struct; a tool's arguments are a JSON object`, func() {
		agent.NewTool("bad", "", func(context.Context, string) (any, error) { return nil, nil })
	})
}
