package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandPaths are every command and subcommand with flags of its own.
var commandPaths = [][]string{
	{"chat"}, {"history"}, {"inspect"}, {"conformance"}, {"session"}, {"session", "validate"}, {"session", "list"},
	{"session", "show"}, {"session", "delete"}, {"session", "export"}, {"session", "import"}, {"session", "fork"}, {"session", "migrate"}, {"session", "prune"}, {"cache"}, {"postgres"}, {"version"},
	{"new", "plugin"}, {"completion"},
}

var flagLine = regexp.MustCompile(`(?m)^  --?([a-z][a-z-]*)`)

// helpFlags lists the flags a command's --help shows.
func helpFlags(t *testing.T, path []string) []string {
	t.Helper()
	out := invocation{}.ok(t, append(slices.Clone(path), "--help")...)
	var names []string
	for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestConfigKeysAreTheFlags: a configuration file may set exactly the
// flags the commands have.
func TestConfigKeysAreTheFlags(t *testing.T) {
	var all []string
	for _, p := range commandPaths {
		for _, f := range helpFlags(t, p) {
			if f != configFileFlag && !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	slices.Sort(all)
	assert.Equal(t, all, configKeys)
}

// TestConfigFile: an operator's file sets flags of every command, the
// command line wins, and a key no command has is refused.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	slow := write("slow.json", `{"plugin": "inmemory", "timeout": "1ns", "page-size": 5}`)
	invocation{}.failsWithOneLine(t, exitFail, []string{"chat", "-m", "hi", "--config-file", slow}, "1ns deadline")
	invocation{env: []string{configFileEnv + "=" + slow}}.failsWithOneLine(t, exitFail, []string{"chat", "-m", "hi"}, "1ns deadline")
	out := invocation{}.ok(t, "chat", "-m", "hi", "--config-file", slow, "--timeout", "5s")
	assert.Contains(t, out, "assistant: ")

	cfg := write("cfg.json", `{"config": {"no_such_option": 1}}`)
	invocation{}.failsWithOneLine(t, exitFail, []string{"chat", "-m", "hi", "--config-file=" + cfg}, "invalid config")

	typo := write("typo.json", `{"timout": "10s"}`)
	invocation{}.failsWithOneLine(t, exitUsage, []string{"chat", "-m", "hi", "--config-file", typo}, `"timout" is not a flag of any wasmhist command`)
	invocation{}.failsWithOneLine(t, exitFail, []string{"chat", "-m", "hi", "--config-file", filepath.Join(dir, "missing.json")}, "configuration file", "check the path")
	notObject := write("list.json", `["plugin"]`)
	invocation{}.failsWithOneLine(t, exitUsage, []string{"chat", "--config-file", notObject}, "is not a JSON object")
}
