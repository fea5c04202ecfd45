package session_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"
)

func slot(data string) session.ProviderState {
	return session.ProviderState{Provider: "p", StateVersion: 1, Data: json.RawMessage(data)}
}

// TestSetStateLeavesCopiesAlone changes a session's slots while copies made
// by assignment share its map: the copies must not see the change.
func TestSetStateLeavesCopiesAlone(t *testing.T) {
	s := session.New()
	s.SetState("a", slot(`{"n":1}`))
	assigned := *s

	s.SetState("a", slot(`{"n":2}`))
	s.SetState("b", slot(`{"n":3}`))
	assert.Equal(t, `{"n":1}`, string(assigned.State["a"].Data))
	assert.NotContains(t, assigned.State, "b")
	assert.Equal(t, `{"n":2}`, string(s.State["a"].Data))

	again := *s
	s.DeleteState("a")
	assert.NotContains(t, s.State, "a")
	assert.Contains(t, again.State, "a", "DeleteState removed the slot from a copy")
	s.DeleteState("missing") // no slot: nothing to do
	assert.Len(t, s.State, 1)
}

func TestSetStateOnZeroSession(t *testing.T) {
	var s session.Session
	s.SetState("a", slot(`{}`))
	require.Len(t, s.State, 1)
	s.DeleteState("a")
	assert.Empty(t, s.State)
}

// TestCloneIsDeep edits a clone's bytes in place: the original must not
// see it.
func TestCloneIsDeep(t *testing.T) {
	s := session.New()
	s.SetState("a", slot(`{"n":1}`))
	c := s.Clone()
	c.State["a"].Data[len(`{"n":`)] = '9'
	c.State["b"] = slot(`{}`)
	assert.Equal(t, `{"n":1}`, string(s.State["a"].Data))
	assert.NotContains(t, s.State, "b")
	assert.Equal(t, s.SessionID, c.SessionID)
}
