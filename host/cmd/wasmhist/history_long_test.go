package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
)

// TestHistoryHundredThousandMessages reads back a session of 100,000
// messages kept in the in-memory plugin's state, past the input cap, page
// by page with the default page size: every message, in order. (The
// session file is written directly; no model is needed.)
func TestHistoryHundredThousandMessages(t *testing.T) {
	t.Parallel()
	const n = 100_000
	var data strings.Builder
	data.WriteString(`{"messages":[`)
	for i := range n {
		if i > 0 {
			data.WriteByte(',')
		}
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		data.WriteString(`{"role":"` + role + `","contents":[{"type":"text","text":"message ` + strconv.Itoa(i) + ` of a long chat"}]}`)
	}
	data.WriteString(`]}`)
	require.Greater(t, data.Len(), host.DefaultLimits().MaxInputBytes, "the state must exceed the input cap")
	file := `{"schema_version":1,"session_id":"long","revision":1,"state":{"history":{"provider":"inmemory","state_version":1,"data":` + data.String() + `}}}`
	r := invocation{dir: t.TempDir()}
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "long.json"), []byte(file), 0o600))

	var rep historyReport
	require.NoError(t, json.Unmarshal([]byte(r.ok(t, "history", "--session", "long.json", "--json")), &rep))
	require.Equal(t, "inmemory", rep.Plugin)
	require.Len(t, rep.Messages, n)
	for i, m := range rep.Messages {
		if want := "message " + strconv.Itoa(i) + " of a long chat"; m.TextContent() != want {
			require.Equal(t, want, m.TextContent(), "message %d", i)
		}
	}
}
