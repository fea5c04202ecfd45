package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChatCompactsAndKeepsOriginals: with --compact-at, chat with the
// offline model summarises the oldest turns once the history passes the
// budget and says so; a later process still remembers what only the
// summary is sent for; history lists every original message and the
// summary beside them, in text and JSON.
func TestChatCompactsAndKeepsOriginals(t *testing.T) {
	t.Parallel()
	for _, plugin := range testPlugins {
		t.Run(plugin, func(t *testing.T) {
			t.Parallel()
			r := invocation{dir: t.TempDir()}
			args := []string{"chat", "--plugin", plugin, "--session", "chat.json", "--compact-at", "60"}
			var outs string
			for _, l := range []string{"I like green tea", "My name is Ann", "I love old jazz records", "Remember that the meeting is on Friday"} {
				outs += r.ok(t, append(args, "-m", l)...)
			}
			assert.Contains(t, outs, "history: the first ", "no turn said it summarised")
			out := r.ok(t, append(args, "-m", "what do I like?")...)
			assert.Contains(t, out, "assistant: You told me you like green tea and you love old jazz records.")

			text := r.ok(t, "history", "--session", "chat.json")
			assert.Contains(t, text, "I like green tea", "an original is missing")
			assert.Contains(t, text, "10 messages")
			assert.Contains(t, text, "summary sent in place of the first ")
			var rep historyReport
			require.NoError(t, json.Unmarshal([]byte(r.ok(t, "history", "--session", "chat.json", "--json")), &rep))
			require.Len(t, rep.Messages, 10, "every original is stored")
			require.NotNil(t, rep.Compaction)
			assert.Contains(t, rep.Compaction.Summary, "I like green tea")
		})
	}
}
