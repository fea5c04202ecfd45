package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"
)

// TestChatAsksBeforeATool: with --ask-before clock, the interactive chat
// asks y/n at the terminal before the offline model's clock call runs; y
// runs it and the model answers from its result, n tells the model the
// user said no. A chat that ends at the question leaves the request in
// the session file, and the next chat on it asks first, before the prompt.
func TestChatAsksBeforeATool(t *testing.T) {
	const question = "allow tool clock {}? [y/n] "
	sessionPath := filepath.Join(t.TempDir(), "s.json")
	chat := func(t *testing.T) (*os.File, *screen, func() int) {
		master, tty := openPTY(t)
		scr := newScreen(master)
		cmd := startInTerminal(t, tty, nil, "chat", "--ask-before", "clock", "--session", sessionPath)
		return master, scr, func() int { return exitCode(t, cmd) }
	}
	send := func(t *testing.T, master *os.File, keys string) {
		_, err := master.Write([]byte(keys))
		require.NoError(t, err)
	}

	// y, then n.
	master, scr, wait := chat(t)
	scr.waitFor(t, "you> ", 1)
	send(t, master, "what time is it?"+keyEnter)
	scr.waitFor(t, question, 1)
	send(t, master, "y"+keyEnter)
	scr.waitFor(t, "assistant: It is", 1)
	scr.waitFor(t, "you> ", 2)
	send(t, master, "what time is it now?"+keyEnter)
	scr.waitFor(t, question, 2)
	send(t, master, "n"+keyEnter)
	scr.waitFor(t, "the user denied this call: the user said no", 1)
	scr.waitFor(t, "you> ", 3)

	// A chat that ends at the question.
	send(t, master, "and what time is it?"+keyEnter)
	scr.waitFor(t, question, 3)
	send(t, master, keyCtrlD)
	assert.Equal(t, 0, wait(), "screen:\n%s", scr)
	scr.waitFor(t, "awaits your decision", 1)
	b, err := os.ReadFile(sessionPath)
	require.NoError(t, err)
	s, err := session.Decode(b)
	require.NoError(t, err)
	require.Len(t, agent.PendingApprovals(s), 1, "the request is in the session file")

	// The next chat asks before its prompt.
	master, scr, wait = chat(t)
	scr.waitFor(t, question, 1)
	assert.NotContains(t, scr.String(), "you> ", "the prompt came before the question")
	send(t, master, "y"+keyEnter)
	scr.waitFor(t, "assistant: It is", 1)
	scr.waitFor(t, "you> ", 1)
	send(t, master, keyCtrlD)
	assert.Equal(t, 0, wait(), "screen:\n%s", scr)
	b, err = os.ReadFile(sessionPath)
	require.NoError(t, err)
	s, err = session.Decode(b)
	require.NoError(t, err)
	assert.Empty(t, s.PendingToolCalls)
}
