package agent_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/openai"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// resumeCell is one cell of the resume matrix: a tool loop of three model
// calls (call c1, call c2, answer) whose failAt-th call fails, then a turn
// that must be accepted by the strict fake. The stored history is the same
// whichever provider stores it (in-memory or SQLite), so the cell does not
// name one: the test runs every cell with both.
type resumeCell struct {
	api     string // "chat" or "responses"
	perCall bool
	failAt  int
	// stored is the history after the failed turn, as role:call-id.
	stored string
	// resumed is how the next turn closed the calls left open.
	resumed string
	// sent is what the next turn's first request carried (beyond what
	// the service already holds, for responses).
	sent string
	// final is the history after the next turn.
	final string
}

const (
	matrixBegin = "<!-- resume-matrix:begin (generated from resumeMatrix in resume_matrix_test.go; go test ./host/agent -run TestPersistenceDocMatchesResumeMatrix -update) -->\n"
	matrixEnd   = "<!-- resume-matrix:end -->\n"
)

// resumeMatrix is what each cell does. persistence.md's resume table is
// its rendering (TestPersistenceDocMatchesResumeMatrix).
var resumeMatrix = func() []resumeCell {
	var out []resumeCell
	for _, api := range []string{"chat", "responses"} {
		// Chat sends the whole history; responses continues the service's
		// conversation and sends only the new items.
		sent := func(history, rest string) string {
			if api == "chat" && history != "" {
				return history + " " + rest
			}
			return rest
		}
		for _, perCall := range []bool{false, true} {
			for failAt := 1; failAt <= 3; failAt++ {
				c := resumeCell{api: api, perCall: perCall, failAt: failAt, resumed: "—"}
				switch {
				case !perCall || failAt == 1:
					// Nothing was committed: the next turn starts afresh.
					c.sent = "user:q2"
					c.final = "user:q2 asst:resumed"
				case failAt == 2:
					c.stored = "user:q1 call:c1"
					c.resumed = "c1: the result the tool returned"
					c.sent = sent(c.stored, "result:c1 user:q2")
					c.final = c.stored + " result:c1 user:q2 asst:resumed"
				case failAt == 3:
					c.stored = "user:q1 call:c1 result:c1 call:c2"
					c.resumed = "c2: the result the tool returned"
					c.sent = sent(c.stored, "result:c2 user:q2")
					c.final = c.stored + " result:c2 user:q2 asst:resumed"
				}
				out = append(out, c)
			}
		}
	}
	return out
}()

func (c resumeCell) mode() string {
	if c.perCall {
		return "per service call"
	}
	return "per run"
}

func resumeMatrixMarkdown() string {
	var b strings.Builder
	b.WriteString("| API | persistence | failing call | stored after the failure | next turn closes | next turn sends | stored after the next turn |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	cell := func(s string) string {
		if s == "" {
			return "nothing"
		}
		return "`" + s + "`"
	}
	for _, c := range resumeMatrix {
		api := "Chat Completions"
		if c.api == "responses" {
			api = "Responses"
		}
		fmt.Fprintf(&b, "| %s | %s | %d of 3 | %s | %s | %s | %s |\n",
			api, c.mode(), c.failAt, cell(c.stored), c.resumed, cell(c.sent), cell(c.final))
	}
	return b.String()
}

// TestPersistenceDocMatchesResumeMatrix keeps persistence.md's resume
// table the rendering of the table the matrix test runs.
func TestPersistenceDocMatchesResumeMatrix(t *testing.T) {
	const path = "persistence.md"
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(b)
	i := strings.Index(doc, matrixBegin)
	j := strings.Index(doc, matrixEnd)
	require.True(t, i >= 0 && j > i, "persistence.md lacks the resume table's markers")
	want := doc[:i+len(matrixBegin)] + resumeMatrixMarkdown() + doc[j:]
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, want, doc, "persistence.md's resume table differs from resumeMatrix; run the test with -update")
}

// renderIDs names messages by role and call id: user:q1, call:c1,
// result:c1, asst:text.
func renderIDs(msgs []abi.Message) string {
	var out []string
	for _, m := range msgs {
		for _, c := range m.Contents {
			switch {
			case c.Type == abi.ContentFunctionCall:
				out = append(out, "call:"+c.CallID)
			case c.Type == abi.ContentFunctionResult:
				out = append(out, "result:"+c.CallID)
			case c.Type == abi.ContentText && m.Role == abi.RoleAssistant:
				out = append(out, "asst:"+c.Text)
			case c.Type == abi.ContentText:
				out = append(out, string(m.Role)+":"+c.Text)
			}
		}
	}
	return strings.Join(out, " ")
}

// sentItems renders what a request to the fake carried, as renderIDs does.
func sentItems(t *testing.T, r openaitest.Request) string {
	t.Helper()
	var out []string
	if r.Responses != nil {
		items, err := r.Responses.Items()
		require.NoError(t, err)
		for _, it := range items {
			switch it.Type {
			case "function_call":
				out = append(out, "call:"+it.CallID)
			case "function_call_output":
				out = append(out, "result:"+it.CallID)
			default:
				role := it.Role
				if role == "assistant" {
					role = "asst"
				}
				out = append(out, role+":"+it.Text())
			}
		}
		return strings.Join(out, " ")
	}
	require.NotNil(t, r.Chat)
	for _, m := range r.Chat.Messages {
		var text string
		_ = json.Unmarshal(m.Content, &text)
		switch m.Role {
		case "tool":
			out = append(out, "result:"+m.ToolCallID)
		case "assistant":
			if text != "" {
				out = append(out, "asst:"+text)
			}
			for _, tc := range m.ToolCalls {
				out = append(out, "call:"+tc.ID)
			}
		default:
			out = append(out, m.Role+":"+text)
		}
	}
	return strings.Join(out, " ")
}

func sqlitePlugin(t *testing.T) *host.Plugin {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	grant := sqlgrant.New(sqlgrant.Config{Path: filepath.Join(t.TempDir(), "history.db")})
	p, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/sqlite")), host.LoadOptions{Grants: []host.Grant{grant}})
	require.NoError(t, err)
	return p
}

func clockTool() agent.Tool {
	return agent.Tool{Name: "clock", Func: func(context.Context, json.RawMessage) (any, error) {
		return map[string]string{"time": "12:00"}, nil
	}}
}

func modelClient(api, url string) model.Client {
	o := openai.Options{BaseURL: url, APIKey: "sk-test", Model: "test-model"}
	if api == "chat" {
		return openai.NewChat(o)
	}
	return openai.NewResponses(o)
}

// TestResumeAfterFailedModelCall runs every cell of resumeMatrix with an
// in-memory and a SQLite provider against the strict fakes: the turn after
// the failure is accepted, sends the open calls' results first, and the
// stored history reads as what happened.
func TestResumeAfterFailedModelCall(t *testing.T) {
	sqlite := sqlitePlugin(t)
	providers := []struct {
		name string
		new  func(key string) agent.HistoryProvider
	}{
		{"in-memory", func(key string) agent.HistoryProvider { return agent.NewMemoryProvider(key) }},
		{"sqlite", func(key string) agent.HistoryProvider { return sqlite.Provider(key) }},
	}
	for _, c := range resumeMatrix {
		for _, pv := range providers {
			t.Run(fmt.Sprintf("%s/%s/fail-at-%d/%s", c.api, strings.ReplaceAll(c.mode(), " ", "-"), c.failAt, pv.name), func(t *testing.T) {
				ctx := context.Background()
				srv := openaitest.NewServer(t)
				p := pv.new("history")
				// Chat Completions keeps nothing: the provider loads the
				// history. The Responses service keeps the conversation:
				// the provider only stores a copy.
				pc := agent.ProviderConfig{Provider: p, SkipLoad: c.api == "responses"}
				a, err := agent.New(agent.Config{
					Model:                            modelClient(c.api, srv.URL),
					Tools:                            []agent.Tool{clockTool()},
					Providers:                        []agent.ProviderConfig{pc},
					RequirePerServiceCallPersistence: c.perCall,
				})
				require.NoError(t, err)
				s := session.New()

				script := []openaitest.Reply{
					openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}),
					openaitest.Calls(openaitest.ToolCall{ID: "c2", Name: "clock", Arguments: `{}`}),
					openaitest.Text("done"),
				}
				script[c.failAt-1] = openaitest.Fail(500, "the server had an error")
				srv.Enqueue(script[:c.failAt]...)
				_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q1")}, nil)
				require.Error(t, err)
				require.Len(t, srv.Requests(), c.failAt)
				history, err := p.Provide(ctx, s, nil)
				require.NoError(t, err)
				assert.Equal(t, c.stored, renderIDs(history), "stored after the failure")

				srv.Enqueue(openaitest.Text("resumed"))
				res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q2")}, nil)
				require.NoError(t, err, "the resumed turn was refused")
				reqs := srv.Requests()
				require.Len(t, reqs, c.failAt+1)
				assert.Equal(t, c.sent, sentItems(t, reqs[c.failAt]), "what the resumed turn sent")
				var resumed []string
				for _, r := range res.Resumed {
					require.Equal(t, agent.ResumedWithResult, r.How)
					require.Equal(t, "clock", r.Name)
					resumed = append(resumed, r.CallID+": the result the tool returned")
				}
				want := []string(nil)
				if c.resumed != "—" {
					want = []string{c.resumed}
				}
				assert.Equal(t, want, resumed, "RunResult.Resumed")
				assert.Empty(t, s.PendingToolCalls, "open calls after the resumed turn")

				history, err = p.Provide(ctx, s, nil)
				require.NoError(t, err)
				assert.Equal(t, c.final, renderIDs(history), "stored after the resumed turn")
				if c.api == "chat" {
					require.NoError(t, openaitest.ValidateHistory(history), "the stored history replays")
				}

				// And the conversation goes on.
				srv.Enqueue(openaitest.Text("more"))
				_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "q3")}, nil)
				require.NoError(t, err, "the turn after the resumed one was refused")
			})
		}
	}
}

type savedSessions struct{ all []*session.Session }

func (s *savedSessions) Save(_ context.Context, x *session.Session) error {
	s.all = append(s.all, x.Clone())
	return nil
}

// A process that died after committing the call that asked for a tool, and
// before recording what the tool returned, leaves open calls without a
// result. The next run repeats a tool marked SafeToRepeat; any other is
// answered with an error saying its result is unknown. Either way the
// service accepts the continuation.
func TestResumeAfterCrashBeforeResult(t *testing.T) {
	for _, safe := range []bool{false, true} {
		t.Run(fmt.Sprintf("safe-to-repeat=%v", safe), func(t *testing.T) {
			ctx := context.Background()
			srv := openaitest.NewServer(t)
			runs := 0
			tool := agent.Tool{Name: "clock", SafeToRepeat: safe, Func: func(context.Context, json.RawMessage) (any, error) {
				runs++
				return "12:00", nil
			}}
			saved := &savedSessions{}
			p := agent.NewMemoryProvider("history")
			a, err := agent.New(agent.Config{
				Model:                            modelClient("responses", srv.URL),
				Tools:                            []agent.Tool{tool},
				Providers:                        []agent.ProviderConfig{{Provider: p, SkipLoad: true}},
				RequirePerServiceCallPersistence: true,
				Saver:                            saved,
			})
			require.NoError(t, err)
			srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "call_r1", Name: "clock", Arguments: `{}`}), openaitest.Fail(500, "down"))
			_, err = a.Run(ctx, session.New(), []abi.Message{abi.NewMessage(abi.RoleUser, "time?")}, nil)
			require.Error(t, err)
			require.Equal(t, 1, runs)
			// What the store held when the process died: the first commit.
			require.NotEmpty(t, saved.all)
			s := saved.all[0]
			require.Len(t, s.PendingToolCalls, 1)
			require.False(t, s.PendingToolCalls[0].Done)

			srv.Enqueue(openaitest.Text("ok"))
			res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "again")}, nil)
			require.NoError(t, err, "the resumed turn was refused")
			require.Len(t, res.Resumed, 1)
			got := res.Resumed[0]
			last := srv.Requests()[len(srv.Requests())-1]
			items, err := last.Responses.Items()
			require.NoError(t, err)
			require.Len(t, items, 2)
			assert.Equal(t, "function_call_output", items[0].Type)
			assert.Equal(t, "call_r1", items[0].CallID)
			if safe {
				assert.Equal(t, agent.ResumedRepeated, got.How)
				assert.Equal(t, 2, runs, "the tool ran again")
				assert.Equal(t, `"12:00"`, string(items[0].Output))
			} else {
				assert.Equal(t, agent.ResumedUnknown, got.How)
				assert.Equal(t, 1, runs, "the tool did not run again")
				assert.Contains(t, string(items[0].Output), "interrupted")
				assert.Equal(t, "tool clock (call_r1) was interrupted; the model was told its result is unknown", got.String())
			}
			history, err := p.Messages(s)
			require.NoError(t, err)
			assert.Equal(t, "user:time? call:call_r1 result:call_r1 user:again asst:ok", renderIDs(history))
			assert.Empty(t, s.PendingToolCalls)
		})
	}
}

// TestResumePerRunAfterOpenEnd: a per-run run whose loop ends with calls
// no model was sent (the iteration bound, a tool that ends the loop)
// leaves them pending when the service keeps the conversation, and the
// next turn answers them, so the service accepts it.
func TestResumePerRunAfterOpenEnd(t *testing.T) {
	for _, end := range []string{"iteration bound", "terminated"} {
		t.Run(end, func(t *testing.T) {
			ctx := context.Background()
			srv := openaitest.NewServer(t)
			tool := clockTool()
			cfg := agent.Config{
				Model:     modelClient("responses", srv.URL),
				Tools:     []agent.Tool{tool},
				Providers: []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history"), SkipLoad: true}},
			}
			if end == "iteration bound" {
				cfg.MaxIterations = 1
			} else {
				inner := tool.Func
				cfg.Tools[0].Func = func(ctx context.Context, args json.RawMessage) (any, error) {
					agent.TerminateLoop(ctx)
					return inner(ctx, args)
				}
			}
			a, err := agent.New(cfg)
			require.NoError(t, err)
			s := session.New()
			srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}))
			_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "time?")}, nil)
			require.NoError(t, err)
			require.Len(t, s.PendingToolCalls, 1, "the call no model was answered on stays open")
			assert.Equal(t, "c1", s.PendingToolCalls[0].CallID)

			srv.Enqueue(openaitest.Text("ok"))
			res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "and now?")}, nil)
			require.NoError(t, err, "the service refused the continuation")
			require.Len(t, res.Resumed, 1)
			assert.Empty(t, s.PendingToolCalls)
			last := srv.Requests()[len(srv.Requests())-1]
			items, err := last.Responses.Items()
			require.NoError(t, err)
			require.NotEmpty(t, items)
			assert.Equal(t, "function_call_output", items[0].Type)
			assert.Equal(t, "c1", items[0].CallID)
		})
	}
}

// TestResumeClientAsIsAfterOpenEnd: a stack used as is without the
// persisting middleware still records the service's conversation, and
// with it the calls the loop left unsent, so the next turn is accepted.
func TestResumeClientAsIsAfterOpenEnd(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.NewServer(t)
	a, err := agent.New(agent.Config{
		Model:                            modelClient("responses", srv.URL),
		Tools:                            []agent.Tool{clockTool()},
		Providers:                        []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history"), SkipLoad: true}},
		RequirePerServiceCallPersistence: true,
		UseClientAsIs:                    true,
		MaxIterations:                    1,
	})
	require.NoError(t, err)
	s := session.New()
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}))
	_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "time?")}, nil)
	require.NoError(t, err)
	require.NotEmpty(t, s.ServiceSessionID)
	require.Len(t, s.PendingToolCalls, 1)

	srv.Enqueue(openaitest.Text("ok"))
	res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "and now?")}, nil)
	require.NoError(t, err, "the service refused the continuation")
	require.Len(t, res.Resumed, 1)
	assert.Equal(t, "c1", res.Resumed[0].CallID)
}

// TestResumeStreamed: a streamed run shows the answers to the calls an
// earlier run left open before the model's updates; a consumer that stops
// at them leaves the calls open and the session unchanged.
func TestResumeStreamed(t *testing.T) {
	ctx := context.Background()
	srv := openaitest.NewServer(t)
	a, err := agent.New(agent.Config{
		Model:         modelClient("responses", srv.URL),
		Tools:         []agent.Tool{clockTool()},
		Providers:     []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history"), SkipLoad: true}},
		MaxIterations: 1,
	})
	require.NoError(t, err)
	s := session.New()
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "c1", Name: "clock", Arguments: `{}`}))
	_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "time?")}, nil)
	require.NoError(t, err)
	require.Len(t, s.PendingToolCalls, 1)
	before := *s

	// A consumer that stops at the first update.
	requests := len(srv.Requests())
	for u, err := range a.RunStream(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "and now?")}, nil) {
		require.NoError(t, err)
		require.NotNil(t, u.Message, "the first update is the answer to the open call")
		assert.Equal(t, abi.RoleTool, u.Message.Role)
		assert.Equal(t, []string{"c1"}, u.Message.ResultIDs())
		break
	}
	assert.Equal(t, requests, len(srv.Requests()), "no model call was made")
	assert.Equal(t, before.Revision, s.Revision)
	require.Len(t, s.PendingToolCalls, 1, "the call is still open")

	// A consumer that reads everything sees the answer first, then the model.
	srv.Enqueue(openaitest.Text("ok"))
	var kinds []string
	for u, err := range a.RunStream(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "and now?")}, nil) {
		require.NoError(t, err)
		switch {
		case u.Message != nil:
			kinds = append(kinds, "message:"+string(u.Message.Role))
		case u.Model != nil:
			kinds = append(kinds, "model")
		}
	}
	require.NotEmpty(t, kinds)
	assert.Equal(t, "message:tool", kinds[0])
	assert.Contains(t, kinds, "model")
	assert.Empty(t, s.PendingToolCalls)
}
