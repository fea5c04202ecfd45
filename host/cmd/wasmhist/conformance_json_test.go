package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestConformanceJSON: --json reports every case with its result, under
// the plugin's --config, and a broken plugin's failures with their reason
// codes.
func TestConformanceJSON(t *testing.T) {
	out := invocation{}.ok(t, "conformance", "--json", "--config", `{"max_messages": 50}`, "inmemory")
	var r conformanceReport
	require.NoError(t, json.Unmarshal([]byte(out), &r), "one JSON object:\n%s", out)
	assert.Equal(t, "inmemory", r.Plugin)
	assert.JSONEq(t, `{"max_messages": 50}`, string(r.Config))
	require.NotEmpty(t, r.Cases)
	assert.Equal(t, len(r.Cases), r.Passed+r.Skipped)
	assert.Zero(t, r.Failed)
	for _, c := range r.Cases {
		assert.Contains(t, []string{"pass", "skip"}, c.Result, c.Name)
		assert.NotEmpty(t, c.Name)
	}

	res := invocation{}.wasmhist(t, "conformance", "--json", brokenWasm)
	require.Equal(t, exitFail, res.code, res.stderr)
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &r), "one JSON object:\n%s", res.stdout)
	require.Positive(t, r.Failed)
	reasons := 0
	for _, c := range r.Cases {
		if c.Result == "fail" {
			assert.NotEmpty(t, c.Detail, c.Name)
			if c.Reason != "" {
				reasons++
			}
		}
	}
	assert.Positive(t, reasons, "failures carry the case's reason code")
}

// TestConformanceOfABoundedPlugin: a plugin that bounds its history by
// configuration passes under a bound of sdktest.MaxMessagesPerSession and
// fails under a smaller one (abi/SPEC.md section 10.1).
func TestConformanceOfABoundedPlugin(t *testing.T) {
	enough := fmt.Sprintf(`{"max_messages": %d}`, sdktest.MaxMessagesPerSession)
	invocation{}.ok(t, "conformance", "--config", enough, "inmemory")
	invocation{}.failsWithOneLine(t, exitFail, []string{"conformance", "--config", `{"max_messages": 2}`, "inmemory"}, "cases failed")
}
