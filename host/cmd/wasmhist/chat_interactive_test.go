package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
)

// TestInteractiveChatSurvivesFailedTurn: at a terminal a failed turn (here
// the model service refusing the request) is reported in at most two
// lines and the prompt comes back with the session as it was; the chat
// ends at Ctrl-D with a status that says whether its last turn failed.
// The failed line stays in the line editor's history: the up arrow brings
// it back to send again.
func TestInteractiveChatSurvivesFailedTurn(t *testing.T) {
	tests := []struct {
		name     string
		replies  []openaitest.Reply
		lines    []string // typed after the failed first one
		wantCode int
		wantEnd  string // on the screen after Ctrl-D
	}{
		// The up arrow recalls the failed line, which is sent again.
		{"next turn answers", []openaitest.Reply{openaitest.Fail(400, "bad request"), openaitest.Text("Noted.")}, []string{keyUp}, 0, "assistant: Noted."},
		{"last turn failed", []openaitest.Reply{openaitest.Fail(400, "bad request")}, nil, exitFail, "the last message failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := openaitest.NewServer(t)
			srv.Enqueue(tc.replies...)
			master, tty := openPTY(t)
			scr := newScreen(master)
			cmd := startInTerminal(t, tty, nil, "chat", "--model", "openai-chat", "--base-url", srv.URL)
			scr.waitFor(t, "you> ", 1)
			_, err := master.Write([]byte("first\r"))
			require.NoError(t, err)
			scr.waitFor(t, "you> ", 2)
			_, report, _ := strings.Cut(scr.String(), "first")
			report, _, _ = strings.Cut(report, "you> ")
			var lines []string
			for _, l := range strings.Split(report, "\n") {
				if strings.TrimSpace(l) != "" {
					lines = append(lines, l)
				}
			}
			assert.NotEmpty(t, lines, "no report of the failed turn")
			assert.LessOrEqual(t, len(lines), 2, "the report is longer than two lines:\n%s", report)
			assert.Contains(t, report, "bad request")
			for i, l := range tc.lines {
				_, err := master.Write([]byte(l + "\r"))
				require.NoError(t, err)
				scr.waitFor(t, "you> ", 3+i)
			}
			_, err = master.Write([]byte{4}) // Ctrl-D: end of input
			require.NoError(t, err)
			assert.Equal(t, tc.wantCode, exitCode(t, cmd), "screen:\n%s", scr)
			scr.waitFor(t, tc.wantEnd, 1)
			assert.Zero(t, srv.Pending(), "scripted replies unused")
			req := srv.LastRequest()
			require.NotNil(t, req.Chat)
			msgs := req.Chat.Messages
			assert.Equal(t, "first", msgs[len(msgs)-1].Text(), "the line sent last")
		})
	}
}
