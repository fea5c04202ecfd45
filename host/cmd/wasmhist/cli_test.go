package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// TestVersion: both spellings print every version a bug report needs.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out := invocation{}.ok(t, args...)
			for _, want := range []string{"wasmhist: ", "abi:       " + abi.Version, "go:        " + runtime.Version(), "wazero:    v1.", "go-sdk:    v1."} {
				assert.Contains(t, out, want)
			}
		})
	}
	invocation{}.failsWithOneLine(t, exitUsage, []string{"version", "extra"}, "takes none")
}

// TestHelpCommand: 'help chat' is chat's help with its details, not the
// list of commands; 'help session validate' a subcommand's.
func TestHelpCommand(t *testing.T) {
	for _, path := range [][]string{{"chat"}, {"session", "validate"}} {
		t.Run(strings.Join(path, " "), func(t *testing.T) {
			out := invocation{}.ok(t, append([]string{"help"}, path...)...)
			short := invocation{}.ok(t, append(slices.Clone(path), "--help")...)
			short, _, _ = strings.Cut(short, "\nRun 'wasmhist help ")
			assert.True(t, strings.HasPrefix(out, short), "help %s is not --help with details:\n%s", path, out)
			assert.Contains(t, out[len(short):], "\nDetails:\n")
		})
	}
	invocation{}.failsWithOneLine(t, exitUsage, []string{"help", "nosuch"}, "unknown command")
	invocation{}.failsWithOneLine(t, exitUsage, []string{"help", "chat", "history"}, "one command at a time")
}

// TestMessageFlag: -m is one message, never blank, never given twice.
func TestMessageFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"empty", []string{"chat", "-m", ""}, "-m needs a message that is not blank"},
		{"blank", []string{"chat", "-m", "   "}, "-m needs a message that is not blank"},
		{"twice", []string{"chat", "-m", "a", "-m", "b"}, "-m given twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			invocation{stdin: "should not be read\n"}.failsWithOneLine(t, exitUsage, tc.args, tc.want)
		})
	}
}

// TestLongStdinLine: a line longer than the limit fails with its number
// and the limit, not the scanner's "token too long".
func TestLongStdinLine(t *testing.T) {
	in := "first\n" + strings.Repeat("x", maxLineBytes+1) + "\n"
	line := invocation{stdin: in}.failsWithOneLine(t, exitFail, []string{"chat"}, "line 2 of standard input is longer than 8 MiB")
	require.NotContains(t, line, "token too long")
}

// TestStatusLinesWhenChanged: after the first answer the status lines
// come back only when where things are changed, or with --status.
func TestStatusLinesWhenChanged(t *testing.T) {
	in := "I like Italian food\nWhat food do I like?\nWhat is 6*7?\n"
	out := invocation{stdin: in}.ok(t, "chat", "--session", "s.json")
	assert.Equal(t, 3, strings.Count(out, "assistant: "))
	assert.Equal(t, 1, strings.Count(out, "history: "), out)
	assert.Equal(t, 1, strings.Count(out, "session: "), out)
	out = invocation{stdin: in}.ok(t, "chat", "--session", "s.json", "--status")
	assert.Equal(t, 3, strings.Count(out, "history: "), out)
	assert.Equal(t, 3, strings.Count(out, "session: "), out)
}

// TestInstalledLayout: a command installed away from the repository finds
// the sample plugins where `make install` puts them, from any directory.
func TestInstalledLayout(t *testing.T) {
	data := t.TempDir()
	plugins := filepath.Join(data, "wasmhist", "plugins")
	require.NoError(t, os.MkdirAll(plugins, 0o755))
	for _, name := range testPlugins {
		b, err := os.ReadFile(filepath.Join(pluginDir, name+".wasm"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(plugins, name+".wasm"), b, 0o644))
	}
	// Away from the repository, with no plugin directory configured.
	inv := invocation{dir: t.TempDir(), env: []string{pluginDirEnv + "=", "XDG_DATA_HOME=" + data}}
	out := inv.ok(t, "chat", "--plugin", "sqlite", "--session", "s.json", "-m", "I like Italian food")
	assert.Contains(t, out, "plugin sqlite")
	invocation{dir: t.TempDir(), env: []string{pluginDirEnv + "=", "XDG_DATA_HOME=" + t.TempDir()}}.failsWithOneLine(t, exitFail,
		[]string{"chat", "-m", "hi"}, "plugin not built", "make install")
}
