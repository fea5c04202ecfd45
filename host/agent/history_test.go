package agent_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/session"
)

// pagedLister serves n messages two at a time; a stuck one hands back the
// same cursor forever, an empty one pages with no messages.
type pagedLister struct {
	*agent.MemoryProvider
	n            int
	stuck, empty bool
	calls        int
}

func (p *pagedLister) List(_ context.Context, _ *session.Session, cursor string, _ int) ([]abi.Message, string, error) {
	p.calls++
	from, _ := strconv.Atoi(cursor)
	switch {
	case p.stuck:
		return []abi.Message{abi.NewMessage(abi.RoleUser, "again")}, "1", nil
	case p.empty:
		return nil, strconv.Itoa(from + 1), nil
	}
	var page []abi.Message
	for i := from; i < min(from+2, p.n); i++ {
		page = append(page, abi.NewMessage(abi.RoleUser, fmt.Sprint("m", i)))
	}
	next := ""
	if from+2 < p.n {
		next = strconv.Itoa(from + 2)
	}
	return page, next, nil
}

func readHistory(a *agent.Agent, s *session.Session) ([]string, error) {
	var out []string
	for m, err := range a.History(context.Background(), s) {
		if err != nil {
			return out, err
		}
		out = append(out, string(m.Role)+":"+m.TextContent())
	}
	return out, nil
}

// TestHistory: the agent's history is what its provider stored, read page
// by page: through a plugin's list export, a native provider's List, and
// the cursor loop over pages; a provider that cannot list, or whose cursor
// never ends, is an error that says so.
func TestHistory(t *testing.T) {
	sqlite := sqlitePlugin(t)
	cases := []struct {
		name    string
		p       agent.HistoryProvider
		skip    bool // the provider only stores
		turns   int
		want    []string
		wantErr string
	}{
		{name: "sqlite plugin", p: sqlite.Provider("history"), turns: 2, want: []string{
			"user:I like tea", "assistant:Noted: you like tea. I'll remember that.",
			"user:I like cake", "assistant:Noted: you like cake. I'll remember that."}},
		{name: "memory provider", p: agent.NewMemoryProvider("history"), turns: 1, want: []string{
			"user:I like tea", "assistant:Noted: you like tea. I'll remember that."}},
		{name: "store-only provider", p: agent.NewMemoryProvider("history"), skip: true, turns: 1, want: []string{
			"user:I like tea", "assistant:Noted: you like tea. I'll remember that."}},
		{name: "five messages in pages of two", p: &pagedLister{MemoryProvider: agent.NewMemoryProvider("h"), n: 5},
			want: []string{"user:m0", "user:m1", "user:m2", "user:m3", "user:m4"}},
		{name: "a cursor that comes back", p: &pagedLister{MemoryProvider: agent.NewMemoryProvider("h"), stuck: true},
			want: []string{"user:again", "user:again"}, wantErr: `returned cursor "1" after an empty page or twice`},
		{name: "empty pages", p: &pagedLister{MemoryProvider: agent.NewMemoryProvider("h"), empty: true},
			wantErr: `returned cursor "1" after an empty page or twice`},
		{name: "no List", p: fixedProvider{}, wantErr: "has no List method"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := agent.New(agent.Config{Model: offline.New(), Providers: []agent.ProviderConfig{{Provider: c.p, SkipLoad: c.skip}}})
			require.NoError(t, err)
			s := session.New()
			for i, q := range []string{"I like tea", "I like cake"}[:c.turns] {
				_, err := a.Run(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, q)}, nil)
				require.NoError(t, err, "turn %d", i)
			}
			got, err := readHistory(a, s)
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, c.want, got)
		})
	}
	t.Run("no provider", func(t *testing.T) {
		a, err := agent.New(agent.Config{Model: offline.New()})
		require.NoError(t, err)
		_, err = readHistory(a, session.New())
		require.ErrorIs(t, err, agent.ErrNoHistory)
	})
}

// fixedProvider provides nothing and stores nothing, and cannot list.
type fixedProvider struct{}

func (fixedProvider) StateKey() string { return "fixed" }
func (fixedProvider) Provide(context.Context, *session.Session, []abi.Message) ([]abi.Message, error) {
	return nil, nil
}
func (fixedProvider) Store(context.Context, *session.Session, []abi.Message, []abi.Message) error {
	return nil
}
