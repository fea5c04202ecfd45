package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helpWidth is the widest line a help text may have: a flag and its
// description on one line of a wide terminal, with no wrapped paragraph.
const helpWidth = 100

// TestHelpShape: every command's --help has the usual shape: a usage line,
// one line per flag, and at least one example of the command; 'wasmhist
// help COMMAND' keeps every line as short.
func TestHelpShape(t *testing.T) {
	t.Parallel()
	for _, path := range commandPaths {
		name := strings.Join(path, " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := invocation{}.ok(t, append(slices.Clone(path), "--help")...)
			require.True(t, strings.HasPrefix(out, "Usage: wasmhist "+name), "no usage line:\n%s", out)
			sections := map[string][]string{}
			section := ""
			for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				assert.LessOrEqual(t, len(l), helpWidth, "line wider than %d columns: %q", helpWidth, l)
				switch {
				case l == "":
					section = ""
				case strings.HasSuffix(l, ":") && !strings.HasPrefix(l, " "):
					section = strings.TrimSuffix(l, ":")
				case section != "":
					sections[section] = append(sections[section], l)
				}
			}
			require.NotEmpty(t, sections["Flags"], "no flags listed:\n%s", out)
			for _, l := range sections["Flags"] {
				assert.Regexp(t, `^  --?[a-z][a-z-]*( [A-Za-z.|]+)?  +\S`, l, "a flag line with its one-line description")
			}
			require.NotEmpty(t, sections["Examples"], "no example:\n%s", out)
			for _, l := range sections["Examples"] {
				assert.True(t, strings.HasPrefix(l, "  wasmhist "+name) || strings.Contains(l, "| wasmhist "+name), "example %q is not of %s", l, name)
			}
			long := invocation{}.ok(t, append([]string{"help"}, path...)...)
			for _, l := range strings.Split(long, "\n") {
				assert.LessOrEqual(t, len(l), helpWidth, "help %s: line wider than %d columns: %q", name, helpWidth, l)
			}
		})
	}
}
