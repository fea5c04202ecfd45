package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConformanceAdvisesLaterMinors: the AssemblyScript sample declares
// ABI 1.0 and refuses a cursor issued before clear with invalid_argument,
// which only ABI 1.1 forbids. It passes, exit status 0, with the finding
// printed as advice under its case in the table and listed in the case's
// advice in --json, naming the rule and its minor.
func TestConformanceAdvisesLaterMinors(t *testing.T) {
	wasm, err := filepath.Abs("../../../plugins/asmemory/asmemory.wasm")
	require.NoError(t, err)
	_, err = os.Stat(wasm)
	require.NoError(t, err, "run `make plugins` first")

	table := invocation{}.ok(t, "conformance", wasm)
	assert.Contains(t, table, "PASS  clear_forgets_history")
	assert.Contains(t, table, "advice: would fail rule stale_cursor_not_empty_last_page of 1.1 (this plugin declares 1.0)")
	assert.Contains(t, table, "0 failed, 1 skipped; 1 advice for ABI versions after 1.0")

	var r conformanceReport
	out := invocation{}.ok(t, "conformance", "--json", wasm)
	require.NoError(t, json.Unmarshal([]byte(out), &r), "one JSON object:\n%s", out)
	assert.Equal(t, "1.0", r.ABI)
	assert.Zero(t, r.Failed)
	assert.Equal(t, 1, r.Advised)
	// The cases ABI 1.2 added give a 1.0 plugin advice at most.
	since12 := []string{"import_pages_read_back", "store_keeps_split_pairs", "readable_after_crashed_instance"}
	for _, c := range r.Cases {
		want := "1.0"
		if slices.Contains(since12, c.Name) {
			want = "1.2"
		}
		assert.Equal(t, want, c.Since, "case %s", c.Name)
		if c.Name != "clear_forgets_history" {
			assert.Empty(t, c.Advice, "case %s", c.Name)
			continue
		}
		assert.Equal(t, "pass", c.Result)
		require.Len(t, c.Advice, 1)
		assert.Equal(t, "stale_cursor_not_empty_last_page", c.Advice[0].Rule)
		assert.Equal(t, "1.1", c.Advice[0].Since)
		assert.Contains(t, c.Advice[0].Detail, "past the end")
	}
}
