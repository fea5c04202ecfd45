package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

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
				if !strings.Contains(first, "assistant: Noted: you like Italian food") {
					t.Errorf("first reply:\n%s", first)
				}
				if !strings.Contains(first, "history: plugin "+plugin+" ") || !strings.Contains(first, `state key "history"`) {
					t.Errorf("first turn does not say where the history went:\n%s", first)
				}
				if !strings.Contains(first, "session: chat.json (session chat, revision 1)") {
					t.Errorf("first turn does not name the session file and revision 1:\n%s", first)
				}

				second := r.ok(t, append(args, "-m", "what food do I like?")...)
				if !regexp.MustCompile(`(?m)^assistant: .*Italian`).MatchString(second) {
					t.Errorf("a new process did not remember; reply:\n%s", second)
				}
				if !strings.Contains(second, "revision 2") {
					t.Errorf("second turn is not revision 2:\n%s", second)
				}
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
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, ", database ") {
		db := filepath.Join(dir, "chat.db")
		if !strings.Contains(out, ", database chat.db") {
			t.Errorf("database not reported as chat.db:\n%s", out)
		}
		if _, err := os.Stat(db); err != nil {
			t.Errorf("the database the output names: %v", err)
		}
		return
	}
	if !strings.Contains(string(session), "Italian food") {
		t.Errorf("plugin %s uses no database, but the session file does not hold the history:\n%s", plugin, session)
	}
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
			if !tt.tool.MatchString(out) {
				t.Errorf("tool activity missing, want %v in:\n%s", tt.tool, out)
			}
			if !strings.Contains(out, tt.reply) {
				t.Errorf("reply missing, want %q in:\n%s", tt.reply, out)
			}
			if !strings.Contains(out, "not saved (pass --session FILE to keep it)") {
				t.Errorf("a chat without --session must say it is not saved:\n%s", out)
			}
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
	if len(replies) != 2 {
		t.Fatalf("want 2 replies, got %d:\n%s", len(replies), out)
	}
	if !strings.Contains(replies[1], "Italian") {
		t.Errorf("second reply does not remember the first message: %q", replies[1])
	}
	if strings.Contains(out, "you>") {
		t.Errorf("prompt printed for piped input:\n%s", out)
	}
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
			if err := json.Unmarshal([]byte(r.ok(t, "history", "--session", "h.json", "--json")), &rep); err != nil {
				t.Fatalf("history --json is not JSON: %v", err)
			}
			if rep.Plugin != plugin || rep.StateKey != "history" || rep.Revision != 2 || rep.SessionID != "h" {
				t.Errorf("report header = %+v", rep)
			}
			if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(rep.SHA256) {
				t.Errorf("sha256 = %q", rep.SHA256)
			}
			var roles []abi.Role
			for _, m := range rep.Messages {
				roles = append(roles, m.Role)
			}
			want := []abi.Role{abi.RoleUser, abi.RoleAssistant, abi.RoleUser, abi.RoleAssistant, abi.RoleTool, abi.RoleAssistant}
			if !slices.Equal(roles, want) {
				t.Fatalf("roles = %v, want %v", roles, want)
			}
			if got := rep.Messages[0].TextContent(); got != "I like Italian food" {
				t.Errorf("first message = %q", got)
			}
			if got := rep.Messages[3].Contents[0]; got.Type != abi.ContentFunctionCall || got.Name != "calculator" {
				t.Errorf("fourth message is not the calculator call: %+v", got)
			}

			// Pages of 4 take two list calls and a cursor; the result is
			// the same history.
			var paged historyReport
			if err := json.Unmarshal([]byte(r.ok(t, "history", "--session", "h.json", "--json", "--page-size", "4")), &paged); err != nil {
				t.Fatal(err)
			}
			a, _ := json.Marshal(rep.Messages)
			b, _ := json.Marshal(paged.Messages)
			if string(a) != string(b) {
				t.Errorf("paged history differs:\n%s\nwant\n%s", b, a)
			}

			text := r.ok(t, "history", "--session", "h.json")
			for _, w := range []string{
				"session h (h.json, revision 2)",
				"1  user       I like Italian food",
				`[call calculator {"expression":"2+3"}]`,
				"6  assistant  2+3 = 5.",
				"6 messages",
			} {
				if !strings.Contains(text, w) {
					t.Errorf("readable history lacks %q:\n%s", w, text)
				}
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
	if !strings.Contains(out, ", database "+db) {
		t.Errorf("output does not name the database %s:\n%s", db, out)
	}
	if _, err := os.Stat(filepath.Join(r.dir, db)); err != nil {
		t.Fatalf("database not where --db said: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "s.db")); err == nil {
		t.Errorf("the default database was created although --db was given")
	}
	var rep historyReport
	if err := json.Unmarshal([]byte(r.ok(t, "history", "--session", "s.json", "--db", db, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Messages) != 2 || rep.Database != db {
		t.Errorf("history from %s: database %q, %d messages, want 2", db, rep.Database, len(rep.Messages))
	}
}
