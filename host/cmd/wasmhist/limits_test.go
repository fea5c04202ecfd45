package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLimitFlagsInHelp: every command that runs a plugin shows the limit
// flags with the host's defaults.
func TestLimitFlagsInHelp(t *testing.T) {
	for _, cmd := range []string{"chat", "history", "inspect", "conformance"} {
		t.Run(cmd, func(t *testing.T) {
			out := invocation{}.ok(t, cmd, "--help")
			for _, want := range []string{"-timeout DURATION", "(default 5s)", "-memory SIZE", "(default 32MiB)", "-max-input SIZE", "-max-output SIZE", "(default 8MiB)", "-config JSON"} {
				assert.Contains(t, out, want)
			}
		})
	}
}

// TestLimitFlagsApply: each limit flag reaches the plugin's calls, and the
// failure names the limit and the flag that raises it.
func TestLimitFlagsApply(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"timeout", []string{"--timeout", "1ns"}, exitFail, []string{"timed out", "1ns deadline", "raise it with --timeout"}},
		{"max-input", []string{"--max-input", "100"}, exitFail, []string{"input too large", "100B --max-input allows", "raise --max-input"}},
		{"memory too small", []string{"--memory", "1MiB"}, exitUsage, []string{"--memory 1MiB", "at least 2752KiB"}},
		{"bad size", []string{"--max-output", "lots"}, exitUsage, []string{`"lots" is not a size`}},
		{"bad timeout", []string{"--timeout", "-1s"}, exitUsage, []string{"--timeout -1s", "positive duration"}},
		{"config not an object", []string{"--config", "[1]"}, exitUsage, []string{"not a JSON object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"chat", "-m", "hello"}, tc.args...)
			invocation{}.failsWithOneLine(t, tc.code, args, tc.want...)
		})
	}
}

// TestConfigReachesThePlugin: --config is validated against the plugin's
// config_schema at load, inline or from a file.
func TestConfigReachesThePlugin(t *testing.T) {
	invocation{}.failsWithOneLine(t, exitFail, []string{"chat", "-m", "hi", "--config", `{"no_such_option": 1}`},
		"invalid config", "fix --config to match the plugin's config_schema")
	out := invocation{}.ok(t, "history", "--help")
	require.Contains(t, out, "@FILE")
}

// TestFlagsThatWouldDoNothing: a flag the chosen model or plugin cannot
// use is refused, not silently ignored.
func TestFlagsThatWouldDoNothing(t *testing.T) {
	invocation{}.failsWithOneLine(t, exitUsage, []string{"chat", "-m", "hi", "--model-name", "gpt-4o"}, "--model-name is for the openai models")
	invocation{}.failsWithOneLine(t, exitUsage, []string{"chat", "-m", "hi", "--plugin", "inmemory", "--db", "x.db"}, "--db x.db", "keeps no history in a database")
}

// TestPluginFileCheckedFirst: a file that is not a WebAssembly module, or
// is far too large to be a plugin, is refused from its header and size,
// without being read whole.
func TestPluginFileCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.wasm")
	require.NoError(t, os.WriteFile(text, []byte("just some notes\n"), 0o644))
	huge := filepath.Join(dir, "huge.wasm")
	f, err := os.Create(huge)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(2<<30)) // sparse: no disk is used
	require.NoError(t, f.Close())
	v2 := filepath.Join(dir, "v2.wasm")
	require.NoError(t, os.WriteFile(v2, []byte{0, 'a', 's', 'm', 2, 0, 0, 0}, 0o644))
	for _, cmd := range []string{"inspect", "conformance"} {
		line := invocation{}.failsWithOneLine(t, exitFail, []string{cmd, text}, "is not a WebAssembly module", "does not start with \\0asm")
		assert.NotContains(t, line, "run 'wasmhist", "no circular hint")
		invocation{}.failsWithOneLine(t, exitFail, []string{cmd, huge}, "is 2GiB, larger than any plugin")
		invocation{}.failsWithOneLine(t, exitFail, []string{cmd, v2}, "unsupported binary version")
	}
}
