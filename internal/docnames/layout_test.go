package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckLayout(t *testing.T) {
	const readme = "# Project\n\nhost/outside is named here, outside the layout.\n\n" +
		"## Layout\n\n```\nabi/        the contract\n  host/txn   commits\n```\n\n## More\n\nhost/later\n"
	tests := []struct {
		name string
		dirs []string
		want []string
	}{
		{"named with and without a slash", []string{"abi", "host/txn"}, nil},
		{"missing", []string{"abi", "host/pggrant"}, []string{"README.md:5: the layout does not name package directory host/pggrant; add a line saying what it holds"}},
		{"named only before the section", []string{"host/outside"}, []string{"README.md:5: the layout does not name package directory host/outside; add a line saying what it holds"}},
		{"named only after the section", []string{"host/later"}, []string{"README.md:5: the layout does not name package directory host/later; add a line saying what it holds"}},
		{"a prefix is not the directory", []string{"host"}, []string{"README.md:5: the layout does not name package directory host; add a line saying what it holds"}},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "README.md")
	require.NoError(t, os.WriteFile(path, []byte(readme), 0o644))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkLayout(path, tt.dirs)
			require.NoError(t, err)
			for i := range tt.want {
				tt.want[i] = filepath.Join(dir, tt.want[i])
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestLayoutOfThisModule: the module's own directories are found, commands
// and test-only packages included, so the check sees every one.
func TestLayoutOfThisModule(t *testing.T) {
	idx := sharedIndex(t)
	assert.Contains(t, idx.dirs, "host/cmd/wasmhist", "a command")
	assert.Contains(t, idx.dirs, "examples", "a package of tests only")
	assert.Contains(t, idx.dirs, "internal/docnames")
	assert.NotContains(t, idx.dirs, "bench/peer", "another module")
}
