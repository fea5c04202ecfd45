package userfacts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/agent/userfacts"
	"github.com/wasmhist/wasmhist/host/session"
)

type saverFunc func(context.Context, *session.Session) error

func (f saverFunc) Save(ctx context.Context, s *session.Session) error { return f(ctx, s) }

// TestFactsFollowTheUser: what Ann states in one session is known in her
// next session, never in Bob's; a run whose commit fails teaches nothing.
func TestFactsFollowTheUser(t *testing.T) {
	ctx := context.Background()
	mem := userfacts.New()
	var failSave bool
	a, err := agent.New(agent.Config{
		Model:            offline.New(),
		Providers:        []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history")}},
		ContextProviders: []agent.ContextProvider{mem},
		Saver: saverFunc(func(context.Context, *session.Session) error {
			if failSave {
				return errors.New("disk full")
			}
			return nil
		}),
	})
	require.NoError(t, err)
	say := func(user string, s *session.Session, text string) (string, error) {
		res, err := a.Run(userfacts.WithUser(ctx, user), s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
		if err != nil {
			return "", err
		}
		return res.Text(), nil
	}

	_, err = say("ann", session.New(), "I like green tea and my name is Ann")
	require.NoError(t, err)
	assert.Equal(t, []string{"I like green tea", "my name is Ann"}, mem.Facts("ann"))

	tests := []struct {
		name, user, question, want string
	}{
		{"her next session", "ann", "what do I like?", "You told me you like green tea."},
		{"her name too", "ann", "what is my name?", "Your name is Ann."},
		{"another user", "bob", "what is my name?", "You haven't told me your name."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := say(tc.user, session.New(), tc.question)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	failSave = true
	_, err = say("carol", session.New(), "I like rain")
	require.Error(t, err)
	assert.Empty(t, mem.Facts("carol"), "a run that did not commit taught a fact")
}
