package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestAdviceFitsTheCause: each mistake gets the advice for its own cause,
// naming where the value came from, in one line.
func TestAdviceFitsTheCause(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // written in the working directory first
		args  []string
		code  int
		want  []string
	}{
		{"store is a text file", map[string]string{"notes.txt": "my notes\n"},
			[]string{"chat", "--store", "notes.txt", "--session", "a", "-m", "hi"}, exitUsage,
			[]string{"--store notes.txt is neither a directory nor an SQLite database", "--store takes a directory, an SQLite file ending in .db, postgres or env:VAR"}},
		{"store names a missing json file", nil,
			[]string{"chat", "--store", "sess.json", "--session", "a", "-m", "hi"}, exitUsage,
			[]string{"--store sess.json does not exist", "pass --session sess.json"}},
		{"db from a configuration file", map[string]string{"cfg.json": `{"db":"postgres://u:pw@h/d"}`},
			[]string{"chat", "--config-file", "cfg.json", "--plugin", "sqlite", "--session", "s.json", "-m", "hi"}, exitUsage,
			[]string{`"db" in configuration file cfg.json takes no connection string`}},
		{"db from a configuration file that the plugin would not use", map[string]string{"cfg.json": `{"db":"x.db"}`},
			[]string{"chat", "--config-file", "cfg.json", "--plugin", "inmemory", "--session", "s.json", "-m", "hi"}, exitUsage,
			[]string{`"db": "x.db" in configuration file cfg.json: plugin inmemory keeps no history in a database`, "drop it"}},
		{"timeout without a unit in a configuration file", map[string]string{"cfg.json": `{"timeout":10}`},
			[]string{"chat", "--config-file", "cfg.json", "--session", "s.json", "-m", "hi"}, exitUsage,
			[]string{"configuration file cfg.json", `"timeout"`, `"10" is not a duration`, `"10s"`}},
		{"timeout without a unit", nil,
			[]string{"chat", "--timeout", "10", "--session", "s.json", "-m", "hi"}, exitUsage,
			[]string{`"10" is not a duration`, `"10s"`}},
		{"absurd timeout", nil,
			[]string{"chat", "--timeout", "1ns", "--session", "s.json", "-m", "hi"}, exitFail,
			[]string{"1ns deadline", "e.g. --timeout 5s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
			line := invocation{dir: dir}.failsWithOneLine(t, tc.code, tc.args, tc.want...)
			assert.NotContains(t, line, "pw@", "the password is printed")
			_, err := os.Stat(filepath.Join(dir, "sess.json"))
			assert.ErrorIs(t, err, os.ErrNotExist, "a store was created under a session file's name")
		})
	}
}

// TestChatOnAStateVersionItCannotRead: a session written by a newer build
// of the plugin (its state version past the loaded one's) is refused with
// the host's reason and advice for whoever chats, not for the plugin's
// author, and not the generic "does not fit".
func TestChatOnAStateVersionItCannotRead(t *testing.T) {
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", "inmemory", "--session", "s.json", "-m", "I like Rome")
	b, err := os.ReadFile(filepath.Join(dir, "s.json"))
	require.NoError(t, err)
	newer := strings.Replace(string(b), `"state_version":1`, `"state_version":9`, 1)
	require.NotEqual(t, string(b), newer, "the session has no state version to raise")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "s.json"), []byte(newer), 0o644))
	line := r.failsWithOneLine(t, exitFail, []string{"chat", "--plugin", "inmemory", "--session", "s.json", "-m", "hi"},
		"written by state version 9 of inmemory, which is newer than the loaded plugin's 1",
		"chat on it with the build of the plugin that wrote it, or one that reads its state version")
	assert.NotContains(t, line, "does not fit")
}

// TestImportRefusesWhatValidateRefuses: a session file as stored whose
// state its plugin cannot read is refused by session import with the
// reason session validate gives, into a file or a store, and nothing is
// written.
func TestImportRefusesWhatValidateRefuses(t *testing.T) {
	dir := t.TempDir()
	r := invocation{dir: dir}
	r.ok(t, "chat", "--plugin", "inmemory", "--session", "good.json", "-m", "I like Rome")
	good, err := os.ReadFile(filepath.Join(dir, "good.json"))
	require.NoError(t, err)
	// The members stay in their order: a session file as stored starts
	// with schema_version, which is how import tells it from a document.
	bad := []byte(strings.Replace(string(good), `"role":"user"`, `"role":7`, 1))
	require.NotEqual(t, good, bad, "the session has no user message to break")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), bad, 0o644))

	const reason = `slot "history" (data at /state/history/data) is not readable by plugin inmemory`
	r.failsWithOneLine(t, exitFail, []string{"session", "validate", "bad.json"}, "bad.json is not a session chat can resume", reason)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"into a file", []string{"session", "import", "copy.json"}},
		{"into a store", []string{"session", "import", "--store", "sessions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := invocation{dir: dir, stdin: string(bad)}
			in.failsWithOneLine(t, exitFail, tc.args, "standard input is not a session chat can resume", reason, "repair or clear the state")
			_, err := os.Stat(filepath.Join(dir, "copy.json"))
			assert.ErrorIs(t, err, os.ErrNotExist, "the refused session was written")
			entries, _ := os.ReadDir(filepath.Join(dir, "sessions"))
			assert.Empty(t, entries, "the refused session was written into the store")
		})
	}
}

// TestWarningsArePlainLines: the agent's and the commit's warnings reach
// the user as the command's other messages do, one plain line each, not
// as slog's key=value records.
func TestWarningsArePlainLines(t *testing.T) {
	var out strings.Builder
	log := warnLogger(&out, "chat")
	log.Info("not shown")
	log.Warn("agent: the service keeps the conversation while a provider also loads history; both will hold it", "provider", "history")
	log.With("session", "trip").Warn("txn: the session store was behind a database's journal", "database", "trip.db", "revision", 3)
	assert.Equal(t,
		"wasmhist chat: warning: agent: the service keeps the conversation while a provider also loads history; both will hold it (provider: history)\n"+
			"wasmhist chat: warning: txn: the session store was behind a database's journal (session: trip, database: trip.db, revision: 3)\n",
		out.String())
}

// TestPluginLoadRefusals: a plugin that does not load is named once, with
// the host's reason and one piece of advice that fits it: a Go plugin
// built without -buildmode=c-shared is told to use it, a plugin declaring
// a newer ABI to upgrade the host or declare an older one.
func TestPluginLoadRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	command := filepath.Join(dir, "command.wasm")
	build := exec.Command(sdktest.GoCommand(), "build", "-o", command, ".")
	build.Dir = filepath.Join("..", "..", "..", "plugins", "inmemory")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	wrongMajor := sdktest.BuildPlugin(t, "../../testdata/hostile/wrongmajor")

	r := invocation{dir: dir}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{command, []string{"loading plugin " + command + ": describe: plugin trapped", "built as a WASI command", "build a Go plugin with -buildmode=c-shared"}},
		{wrongMajor, []string{"loading plugin " + wrongMajor + ": ", "this host speaks ABI v", "upgrade the host"}},
	} {
		line := r.failsWithOneLine(t, exitFail, []string{"inspect", tc.path}, tc.want...)
		for _, named := range []string{"host: load", "host: plugin"} {
			assert.NotContains(t, line, named, "the plugin is named again")
		}
		assert.NotContains(t, line, "fix the plugin", "a second piece of advice")
		assert.NotContains(t, line, "rebuild the plugin against this version of sdk", "a second piece of advice")
	}
}

// TestInvalidOutputAdvice: a refused answer to an export that writes is
// the plugin's new output, which nothing stored yet, so the advice is to
// fix the plugin; a refused answer read from storage may be a stored
// message to repair.
func TestInvalidOutputAdvice(t *testing.T) {
	refused := func(export string) error {
		return &host.PluginError{Plugin: "p", Export: export, Err: fmt.Errorf("%w: state: not an array", host.ErrInvalidOutput)}
	}
	for _, export := range []string{abi.ExportStore, abi.ExportClear, abi.ExportMigrateState} {
		a := pluginAdvice(refused(export))
		assert.Contains(t, a, "nothing was stored; fix the plugin", export)
		assert.NotContains(t, a, "repair or clear", export)
	}
	for _, export := range []string{abi.ExportProvide, abi.ExportList} {
		assert.Contains(t, pluginAdvice(refused(export)), "repair or clear the plugin's stored history", export)
	}
}

// TestConformanceNamesTheLimit: a case that fails on a limit says which
// limit and the flag that raises it, as chat does.
func TestConformanceNamesTheLimit(t *testing.T) {
	t.Parallel()
	spins := sdktest.BuildPlugin(t, "../../testdata/hostile/spins")
	res := invocation{dir: t.TempDir()}.wasmhist(t, "conformance", "--timeout", "200ms", "--run", "^provide_returns_stored_in_order$", spins)
	require.Equal(t, exitFail, res.code, "stderr: %s", res.stderr)
	assert.Contains(t, res.stdout, "plugin call timed out")
	assert.Contains(t, res.stdout, "ran past its 200ms deadline: raise it with --timeout")
}
