package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

func TestHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"top", []string{"--help"}, []string{"Usage: wasmhist <command>", "chat", "history", "inspect", "conformance", "session"}},
		{"help", []string{"help"}, []string{"Usage: wasmhist <command>"}},
		{"chat", []string{"chat", "--help"}, []string{"Usage: wasmhist chat", "-plugin", "-session", "-per-service-call", "-model", "-base-url", "-db", "OPENAI_API_KEY"}},
		{"history", []string{"history", "--help"}, []string{"Usage: wasmhist history", "-session", "-json"}},
		{"inspect", []string{"inspect", "--help"}, []string{"Usage: wasmhist inspect", "-json"}},
		{"conformance", []string{"conformance", "--help"}, []string{"Usage: wasmhist conformance", "-run"}},
		{"session", []string{"session", "--help"}, []string{"Usage: wasmhist session <subcommand>", "validate FILE"}},
		{"session validate", []string{"session", "validate", "--help"}, []string{"Usage: wasmhist session validate FILE", "schemas/session.json"}},
		{"-h", []string{"chat", "-h"}, []string{"Usage: wasmhist chat"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := invocation{}.ok(t, tt.args...)
			for _, w := range tt.want {
				assert.Contains(t, out, w, "help")
			}
		})
	}
}

// TestErrorsAreOneLine checks that each failure is one line on stderr
// saying what failed and what to do, with a non-zero exit status.
func TestErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badSession := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(badSession, []byte(`{"schema_version": 1, "session_id": "bad", "revision": -1}`), 0o600))
	third := filepath.Join(dir, "third.json")
	require.NoError(t, os.WriteFile(third, []byte(`{"schema_version": 1, "session_id": "third", "revision": 1, "state": {"history": {"provider": "recent", "state_version": 1, "data": {}}}}`), 0o600))
	noPlugins := []string{pluginDirEnv + "=" + t.TempDir()}
	tests := []struct {
		name string
		env  []string
		code int
		args []string
		want []string
	}{
		{"no command", nil, exitUsage, nil, []string{"no command", "wasmhist --help"}},
		{"unknown command", nil, exitUsage, []string{"chatt"}, []string{`unknown command "chatt"`, "wasmhist --help"}},
		{"unknown flag", nil, exitUsage, []string{"chat", "--bogus"}, []string{"wasmhist chat: ", "-bogus", "wasmhist chat --help"}},
		{"plugin not built", noPlugins, exitFail, []string{"chat", "--plugin", "sqlite", "-m", "hi"}, []string{`built-in plugin "sqlite"`, "make plugins"}},
		{"plugin not built, inspect", noPlugins, exitFail, []string{"inspect", "inmemory"}, []string{"wasmhist inspect: ", "make plugins"}},
		{"unknown plugin name", nil, exitUsage, []string{"chat", "--plugin", "postgres", "-m", "hi"}, []string{`unknown plugin "postgres"`, "inmemory, sqlite"}},
		{"plugin file missing", nil, exitFail, []string{"inspect", "nothere.wasm"}, []string{"nothere.wasm", "check the path"}},
		{"not a plugin", nil, exitFail, []string{"inspect", badSession}, []string{"plugin file " + badSession, "is not a WebAssembly module"}},
		{"bad session file", nil, exitFail, []string{"chat", "--session", badSession, "-m", "hi"}, []string{badSession, "/revision", "wasmhist session validate"}},
		{"third-party plugin not named", nil, exitUsage, []string{"history", "--session", third}, []string{`plugin "recent", which is not built in`, "--plugin"}},
		{"third-party plugin not named, chat", nil, exitUsage, []string{"chat", "--session", third, "-m", "hi"}, []string{`plugin "recent", which is not built in`, "--plugin"}},
		{"sqlite without a database", nil, exitUsage, []string{"chat", "--plugin", "sqlite", "-m", "hi"}, []string{"plugin sqlite keeps history in a database", "--session FILE", "--db PATH"}},
		{"session name", nil, exitUsage, []string{"chat", "--session", ".json", "-m", "hi"}, []string{"name a file"}},
		{"history without session", nil, exitUsage, []string{"history"}, []string{"wasmhist history --session FILE"}},
		{"history of missing session", nil, exitFail, []string{"history", "--session", filepath.Join(dir, "none.json")}, []string{"none.json", "does not exist", "wasmhist chat --session"}},
		{"unknown model", nil, exitUsage, []string{"chat", "--model", "gpt", "-m", "hi"}, []string{`--model "gpt"`, "offline, openai-chat, openai-responses"}},
		{"openai without key", nil, exitUsage, []string{"chat", "--model", "openai-chat", "-m", "hi"}, []string{"OPENAI_API_KEY", "--base-url"}},
		{"inspect without plugin", nil, exitUsage, []string{"inspect", "--json"}, []string{"want exactly one PLUGIN.wasm"}},
		{"session validate missing file", nil, exitFail, []string{"session", "validate", filepath.Join(dir, "none.json")}, []string{"none.json", "check the path"}},
		{"session without subcommand", nil, exitUsage, []string{"session"}, []string{"wasmhist session validate FILE"}},
		{"conformance bad regexp", nil, exitUsage, []string{"conformance", "--run", "(", "inmemory"}, []string{"--run", "regular expression"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := invocation{env: tt.env}
			// Errors go to stderr only.
			res := r.wasmhist(t, tt.args...)
			assert.Empty(t, res.stdout, "stdout on failure")
			r.failsWithOneLine(t, tt.code, tt.args, tt.want...)
		})
	}
}

func TestInspect(t *testing.T) {
	t.Parallel()
	wasm := filepath.Join(pluginDir, "inmemory.wasm")
	b, err := os.ReadFile(wasm)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	wantSum := hex.EncodeToString(sum[:])

	text := invocation{}.ok(t, "inspect", "inmemory")
	for _, w := range []string{
		"plugin:        inmemory 0.1.0",
		"sha256:        " + wantSum,
		"abi:           " + abi.Version + " (this host speaks " + abi.Version + ")",
		"exports:       describe, provide, store, list, clear",
		"capabilities:  none",
		"state schema:",
		`"title": "inmemory plugin state"`,
		"config schema:",
		`"max_messages"`,
	} {
		assert.Contains(t, text, w, "inspect")
	}

	var r inspection
	require.NoError(t, json.Unmarshal([]byte(invocation{}.ok(t, "inspect", "--json", wasm)), &r), "inspect --json")
	assert.Equal(t, wantSum, r.SHA256)
	assert.Equal(t, "inmemory", r.Name)
	assert.Equal(t, abi.Version, r.ABI)
	assert.Equal(t, int64(len(b)), r.Size)
	assert.Subset(t, r.Exports, abi.RequiredExports())
	assert.True(t, json.Valid(r.StateSchema), "state schema is not JSON: %s", r.StateSchema)
	assert.True(t, json.Valid(r.ConfigSchema), "config schema is not JSON: %s", r.ConfigSchema)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	var names []string
	for _, c := range sdktest.Cases() {
		names = append(names, c.Name)
	}
	for _, plugin := range testPlugins {
		t.Run(plugin, func(t *testing.T) {
			t.Parallel()
			out := invocation{}.ok(t, "conformance", plugin)
			// The sample plugins implement every optional export but
			// migrate_state, whose case is skipped.
			for _, n := range names {
				want := "PASS"
				if n == "migrate_state_serves_result" {
					want = "SKIP"
				}
				assert.Regexp(t, `(?m)^`+want+`  `+regexp.QuoteMeta(n)+` `, out, "no %s row for %s", want, n)
			}
			assert.Contains(t, out, strconv.Itoa(len(names))+" cases: "+strconv.Itoa(len(names)-1)+" passed, 0 failed, 1 skipped", "summary")
		})
	}
	t.Run("broken", func(t *testing.T) {
		t.Parallel()
		r := invocation{}
		res := r.wasmhist(t, "conformance", brokenWasm)
		require.Equal(t, exitFail, res.code, "exit status for a broken plugin:\n%s", res.stdout)
		for _, w := range []string{
			"conformance of broken 0.0.1",
			"PASS  describe ",
			"FAIL  provide_returns_stored_in_order ",
			"got 2 messages, want 3",
		} {
			assert.Contains(t, res.stdout, w, "table")
		}
		r.failsWithOneLine(t, exitFail, []string{"conformance", brokenWasm}, "cases failed", "fix the plugin")
	})
	t.Run("run filter", func(t *testing.T) {
		t.Parallel()
		out := invocation{}.ok(t, "conformance", "--run", "^describe$", brokenWasm)
		assert.Contains(t, out, "1 cases: 1 passed, 0 failed", "--run did not select one case")
		assert.NotContains(t, out, "provide_returns", "--run did not select one case")
	})
}

func TestSessionValidate(t *testing.T) {
	t.Parallel()
	r := invocation{dir: t.TempDir()}
	r.ok(t, "chat", "--session", "good.json", "-m", "I like tea")
	out := r.ok(t, "session", "validate", "good.json")
	assert.True(t, strings.HasPrefix(out, "OK: good.json: session good, schema version 1, revision 1, state slots: history (inmemory, state version 1)"),
		"validate of a good session:\n%s", out)

	tests := []struct {
		name, doc string
		want      []string
	}{
		{"not JSON", `{"schema_version": 1,`, []string{"not valid JSON"}},
		{"no session id", `{"schema_version": 1, "revision": 0}`, []string{"session_id"}},
		{"negative revision", `{"schema_version": 1, "session_id": "x", "revision": -1}`, []string{"/revision"}},
		{"unknown field", `{"schema_version": 1, "session_id": "x", "revision": 0, "extra": true}`, []string{"extra"}},
		{"future schema version", `{"schema_version": 2, "session_id": "x", "revision": 0}`, []string{"/schema_version"}},
		{"slot without provider", `{"schema_version": 1, "session_id": "x", "revision": 0, "state": {"history": {"state_version": 1, "data": {}}}}`, []string{"/state/history", "provider"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "x.json")
			require.NoError(t, os.WriteFile(path, []byte(tt.doc), 0o600))
			invocation{}.failsWithOneLine(t, exitFail, []string{"session", "validate", path},
				append([]string{"wasmhist session validate: ", path, "is not a valid session"}, tt.want...)...)
		})
	}
}
