package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// TestChatRemembersAcrossProcesses is the main job: one process is told a
// fact, a new process with the same session file is asked about it, and the
// answer comes from the history the plugin stored.
func TestChatRemembersAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, plugin := range testPlugins {
		for _, perCall := range []bool{false, true} {
			name := plugin + "/per-run"
			if perCall {
				name = plugin + "/per-service-call"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := invocation{dir: t.TempDir()}
				args := []string{"chat", "--plugin", plugin, "--session", "chat.json"}
				if perCall {
					args = append(args, "--per-service-call")
				}
				first := r.ok(t, append(args, "-m", "I like Italian food")...)
				assert.Contains(t, first, "assistant: Noted: you like Italian food", "first reply")
				assert.Contains(t, first, "history: plugin "+plugin+" ", "first turn does not say where the history went")
				assert.Contains(t, first, `state key "history"`, "first turn does not say where the history went")
				assert.Contains(t, first, "session: chat.json (session chat, revision 1)", "first turn does not name the session file and revision 1")

				second := r.ok(t, append(args, "-m", "what food do I like?")...)
				assert.Regexp(t, `(?m)^assistant: .*Italian`, second, "a new process did not remember")
				assert.Contains(t, second, "revision 2", "second turn is not revision 2")
				checkStoredWhereSaid(t, r.dir, plugin, first)
			})
		}
	}
}

// checkStoredWhereSaid checks that a plugin using sql wrote the database
// it named, beside the session file, and that an inmemory session keeps
// its history in the session file itself.
func checkStoredWhereSaid(t *testing.T, dir, plugin, out string) {
	t.Helper()
	session, err := os.ReadFile(filepath.Join(dir, "chat.json"))
	require.NoError(t, err)
	if strings.Contains(out, ", database ") {
		assert.Contains(t, out, ", database chat.db", "database not reported as chat.db")
		assert.FileExists(t, filepath.Join(dir, "chat.db"), "the database the output names")
		return
	}
	assert.Contains(t, string(session), "Italian food", "plugin %s uses no database, but the session file does not hold the history", plugin)
}

func TestChatShowsToolActivity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, message string
		tool          *regexp.Regexp
		reply         string
	}{
		{"calculator", "what is 12*7?", regexp.MustCompile(`(?m)^tool: calculator \{"expression":"12\*7"\} -> \{.*"result":"84"\}$`), "assistant: 12*7 = 84."},
		{"clock", "what time is it?", regexp.MustCompile(`(?m)^tool: clock \{\} -> \{.*"timezone":"UTC".*\}$`), "assistant: It is "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := invocation{}.ok(t, "chat", "-m", tt.message)
			assert.Regexp(t, tt.tool, out, "tool activity missing")
			assert.Contains(t, out, tt.reply, "reply missing")
			assert.Contains(t, out, "not saved (pass --session FILE to keep it)", "a chat without --session must say it is not saved")
		})
	}
}

// TestChatInteractive reads messages from standard input, one a line, in
// one process; the second line is answered from the first.
func TestChatInteractive(t *testing.T) {
	t.Parallel()
	r := invocation{stdin: "I like Italian food\n\nwhat food do I like?\n"}
	out := r.ok(t, "chat")
	replies := regexp.MustCompile(`(?m)^assistant: .*$`).FindAllString(out, -1)
	require.Len(t, replies, 2, "output:\n%s", out)
	assert.Contains(t, replies[1], "Italian", "second reply does not remember the first message")
	assert.NotContains(t, out, "you>", "prompt printed for piped input")
}

// TestHistory reads back what chat stored, readable and as JSON.
func TestHistory(t *testing.T) {
	t.Parallel()
	for _, plugin := range testPlugins {
		t.Run(plugin, func(t *testing.T) {
			t.Parallel()
			r := invocation{dir: t.TempDir()}
			for _, m := range []string{"I like Italian food", "what is 2+3?"} {
				r.ok(t, "chat", "--plugin", plugin, "--session", "h.json", "-m", m)
			}

			var rep historyReport
			// The plugin is found from the session: no --plugin here.
			require.NoError(t, json.Unmarshal([]byte(r.ok(t, "history", "--session", "h.json", "--json")), &rep), "history --json is not JSON")
			assert.Equal(t, plugin, rep.Plugin)
			assert.Equal(t, "history", rep.StateKey)
			assert.EqualValues(t, 2, rep.Revision)
			assert.Equal(t, "h", rep.SessionID)
			assert.Regexp(t, `^[0-9a-f]{64}$`, rep.SHA256)
			var roles []abi.Role
			for _, m := range rep.Messages {
				roles = append(roles, m.Role)
			}
			want := []abi.Role{abi.RoleUser, abi.RoleAssistant, abi.RoleUser, abi.RoleAssistant, abi.RoleTool, abi.RoleAssistant}
			require.Equal(t, want, roles)
			assert.Equal(t, "I like Italian food", rep.Messages[0].TextContent())
			require.NotEmpty(t, rep.Messages[3].Contents)
			call := rep.Messages[3].Contents[0]
			assert.Equal(t, abi.ContentFunctionCall, call.Type, "fourth message is not the calculator call: %+v", call)
			assert.Equal(t, "calculator", call.Name, "fourth message is not the calculator call: %+v", call)

			// Pages of 4 take two list calls and a cursor; the result is
			// the same history.
			var paged historyReport
			require.NoError(t, json.Unmarshal([]byte(r.ok(t, "history", "--session", "h.json", "--json", "--page-size", "4")), &paged))
			a, err := json.Marshal(rep.Messages)
			require.NoError(t, err)
			b, err := json.Marshal(paged.Messages)
			require.NoError(t, err)
			assert.JSONEq(t, string(a), string(b), "paged history differs")

			text := r.ok(t, "history", "--session", "h.json")
			for _, w := range []string{
				"session h (h.json, revision 2)",
				"1  user       I like Italian food",
				`[call calculator {"expression":"2+3"}]`,
				"6  assistant  2+3 = 5.",
				"6 messages",
			} {
				assert.Contains(t, text, w, "readable history")
			}
		})
	}
}

// TestChatRefusesAnotherPluginsSession keeps a session's history with the
// plugin that wrote it.
func TestChatRefusesAnotherPluginsSession(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--session", "s.json", "-m", "hello")
	r.failsWithOneLine(t, exitUsage, []string{"chat", "--plugin", brokenWasm, "--session", "s.json", "-m", "hi"},
		`keeps its history with plugin "inmemory", not "broken"`, "--plugin inmemory")
}

// TestChatDatabaseFlag puts the sqlite plugin's database where --db says,
// and history reads it from there.
func TestChatDatabaseFlag(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	db := filepath.Join("data", "history.db")
	out := r.ok(t, "chat", "--plugin", "sqlite", "--session", "s.json", "--db", db, "-m", "I like Italian food")
	assert.Contains(t, out, ", database "+db, "output does not name the database")
	require.FileExists(t, filepath.Join(r.dir, db), "database not where --db said")
	assert.NoFileExists(t, filepath.Join(r.dir, "s.db"), "the default database was created although --db was given")
	var rep historyReport
	require.NoError(t, json.Unmarshal([]byte(r.ok(t, "history", "--session", "s.json", "--db", db, "--json")), &rep))
	assert.Len(t, rep.Messages, 2, "history from %s", db)
	assert.Equal(t, db, rep.Database)
}
