package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckRationale(t *testing.T) {
	const rationale = "# Rationale\n\n### Why one?\n\ntext\n\n## Why two words?\n"
	files := map[string]string{
		"RATIONALE.md": rationale,
		"a.go":         "package a\n\n// See RATIONALE: \"Why one?\".\nvar x int\n",
		"b.go": "package a\n\n// The entry (see RATIONALE, \"Why two\n// words?\") spans lines.\n" +
			"// And RATIONALE: \"Why gone?\" is stale.\nvar y int\n",
		"testdata/c.go": "package c\n\n// RATIONALE: \"Why skipped?\"\n",
		"peer/go.mod":   "module peer\n",
		"peer/d.go":     "package d\n\n// RATIONALE: \"Why another module?\"\n",
		"e.go":          "package a\n\n// RATIONALE.md is named here without a title.\nvar s = \"RATIONALE: \\\"Why in a string?\\\"\"\n",
	}
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	got, err := checkRationale(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{
		filepath.Join(dir, "b.go") + `:5: RATIONALE.md has no entry "Why gone?"; name an existing heading, or add the entry`,
	}, got)
}
