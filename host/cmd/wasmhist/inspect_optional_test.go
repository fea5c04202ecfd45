package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInspectReportsImplementedOptionalExports: every SDK plugin exports
// list, clear and migrate_state, answering unimplemented for what its
// provider lacks; inspect reports what the provider really serves. The
// sample plugins implement list and clear, not migrate_state.
func TestInspectReportsImplementedOptionalExports(t *testing.T) {
	t.Parallel()
	for _, plugin := range testPlugins {
		t.Run(plugin, func(t *testing.T) {
			t.Parallel()
			var r inspection
			require.NoError(t, json.Unmarshal([]byte(invocation{}.ok(t, "inspect", "--json", plugin)), &r))
			assert.Equal(t, []string{"describe", "provide", "store", "list", "clear"}, r.Exports, "exports served")
			assert.Equal(t, []string{"migrate_state"}, r.Unimplemented, "exported but answering unimplemented")
			assert.Equal(t, []string{"migrate_state"}, r.Missing, "optional exports not served")

			text := invocation{}.ok(t, "inspect", plugin)
			assert.Contains(t, text, "exports:       describe, provide, store, list, clear\n")
			assert.Contains(t, text, "not served:    migrate_state (optional; absent or answering unimplemented)")
		})
	}
}
