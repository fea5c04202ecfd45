package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// migratesWasm builds testdata/migrates once: a plugin at state version 2
// whose migrate_state moves version 1's messages.
var migratesWasm = sync.OnceValues(func() (string, error) { return sdktest.Build("./testdata/migrates") })

// TestConformanceOlderState: --older-state gives the migrate_state case
// the older state it needs, which a plugin in any language can write;
// without it the case is skipped naming the flag, and a file that is not
// such a state is refused before anything runs.
func TestConformanceOlderState(t *testing.T) {
	wasm, err := migratesWasm()
	require.NoError(t, err)
	dir := t.TempDir()
	r := invocation{dir: dir}
	const msg = `{"role":"user","contents":[{"type":"text","text":"from version 1"}]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "v1.json"), []byte(`{"version":1,"state":{"messages":[`+msg+`]},"messages":[`+msg+`]}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wrong.json"), []byte(`{"version":1,"state":{"messages":[`+msg+`]},"messages":[]}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"state":{}}`), 0o644))
	caseOf := func(args ...string) caseReport {
		t.Helper()
		res := r.wasmhist(t, append([]string{"conformance", "--json", "--run", "^migrate_state"}, append(args, wasm)...)...)
		var rep conformanceReport
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &rep), "one JSON object:\n%s\n%s", res.stdout, res.stderr)
		require.Len(t, rep.Cases, 1)
		return rep.Cases[0]
	}
	c := caseOf()
	assert.Equal(t, "skip", c.Result)
	assert.Contains(t, c.Detail, "--older-state FILE")
	c = caseOf("--older-state", "v1.json")
	assert.Equal(t, "pass", c.Result, c.Detail)
	c = caseOf("--older-state", "wrong.json")
	assert.Equal(t, "fail", c.Result, "a history the older state does not hold")
	r.failsWithOneLine(t, exitUsage, []string{"conformance", "--older-state", "bad.json", wasm}, "bad.json", "lacks version, state or messages")
	r.failsWithOneLine(t, exitUsage, []string{"conformance", "--older-state", "missing.json", wasm}, "missing.json", "pass a file an older build's state was saved in")
}
