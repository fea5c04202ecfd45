package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pluginFlagNames are what the command reference's "[plugin flags]" stands for.
var pluginFlagNames = []string{"config", "timeout", "memory", "max-input", "max-output"}

var (
	readmeRow  = regexp.MustCompile("(?m)^\\| `wasmhist ([^`]*)`")
	readmeFlag = regexp.MustCompile(`(?:^|[\s\[])--?([a-z][a-z-]*)`)
)

// TestReadmeCommandTable: the command table of docs/commands.md (the
// reference the README links to) shows, for every command, exactly the
// flags its --help lists.
func TestReadmeCommandTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "commands.md"))
	require.NoError(t, err)
	rows := readmeRow.FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, rows, "no command table in docs/commands.md")
	seen := map[string]bool{}
	for _, row := range rows {
		synopsis := strings.ReplaceAll(row[1], `\|`, "|")
		var path []string
		for _, w := range strings.Fields(synopsis) {
			if strings.ContainsAny(w, "[-.") || strings.ToUpper(w) == w {
				break
			}
			path = append(path, w)
		}
		name := strings.Join(path, " ")
		t.Run(name, func(t *testing.T) {
			var documented []string
			for _, m := range readmeFlag.FindAllStringSubmatch(synopsis, -1) {
				if m[1] != "version" || name != "version" {
					documented = append(documented, m[1])
				}
			}
			if strings.Contains(synopsis, "[plugin flags]") {
				documented = append(documented, pluginFlagNames...)
			}
			var listed []string
			for _, f := range helpFlags(t, path) {
				if f != configFileFlag {
					listed = append(listed, f)
				}
			}
			slices.Sort(documented)
			slices.Sort(listed)
			assert.Equal(t, listed, documented, "docs/commands.md row for %q against its --help", name)
		})
		seen[name] = true
	}
	for _, p := range commandPaths {
		if len(p) == 1 && p[0] == "session" {
			continue // documented through its subcommands
		}
		assert.True(t, seen[strings.Join(p, " ")], "docs/commands.md's command table has no row for %q", strings.Join(p, " "))
	}
}
