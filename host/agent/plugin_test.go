package agent_test

import (
	"context"
	"encoding/json"
	"iter"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// echoModel answers every call with the text of the last message.
type echoModel struct{}

func (echoModel) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	return &model.Response{Messages: []abi.Message{abi.NewMessage(abi.RoleAssistant, "echo "+last.TextContent())}}, nil
}

func (m echoModel) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		r, err := m.Complete(ctx, req)
		if err != nil {
			yield(model.Update{}, err)
			return
		}
		yield(model.Update{Role: abi.RoleAssistant, Contents: r.Messages[0].Contents}, nil)
	}
}

func listAll(t *testing.T, p *host.Plugin, s *session.Session, key string) []string {
	t.Helper()
	msgs, _, err := p.List(context.Background(), s, key, "", 100)
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+":"+m.TextContent())
	}
	return out
}

// A primary and an audit provider backed by the same WebAssembly plugin keep
// their data apart, and clearing one leaves the other byte for byte.
func TestAgentPrimaryAndAuditOfOnePlugin(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(sdktest.BuildPlugin(t, "../../plugins/inmemory")), host.LoadOptions{})
	require.NoError(t, err)
	a, err := agent.New(agent.Config{
		Model:     echoModel{},
		Providers: []agent.ProviderConfig{{Provider: p.Provider("primary")}, agent.Audit(p.Provider("audit"))},
	})
	require.NoError(t, err)
	s := session.New()
	for _, q := range []string{"one", "two"} {
		_, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, q)}, nil)
		require.NoError(t, err)
	}
	want := `["user:one","assistant:echo one","user:two","assistant:echo two"]`
	for _, key := range []string{"primary", "audit"} {
		got, _ := json.Marshal(listAll(t, p, s, key))
		require.JSONEq(t, want, string(got), "%s", key)
	}
	auditBefore, _ := json.Marshal(s.State["audit"])
	require.NoError(t, p.Clear(ctx, s, "primary"))
	require.Empty(t, listAll(t, p, s, "primary"), "primary after clear")
	auditAfter, _ := json.Marshal(s.State["audit"])
	require.JSONEq(t, string(auditBefore), string(auditAfter), "clearing primary changed audit")
	// The next run loads only the (now empty) primary.
	res, err := a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "three")}, nil)
	require.NoError(t, err)
	require.Equal(t, "echo three", res.Text())
	require.Len(t, listAll(t, p, s, "audit"), 6, "audit")
}
