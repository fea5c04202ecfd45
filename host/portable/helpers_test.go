package portable_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
)

// demoSession has two slots (a primary and an audit copy) and every field
// a document carries.
func demoSession() *session.Session {
	return &session.Session{
		SchemaVersion: session.SchemaVersion, SessionID: "demo", ServiceSessionID: "resp_1", Revision: 7,
		State: map[string]session.ProviderState{
			"history": {Provider: "sqlite", StateVersion: 1, Data: json.RawMessage(`{}`)},
			"audit":   {Provider: "inmemory", StateVersion: 2, Data: json.RawMessage(`{"messages":[]}`)},
		},
		PendingToolCalls: []session.PendingToolCall{{CallID: "c9", Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}},
		RecentRuns:       []session.RunRecord{{RunID: "run-1", InputSHA256: strings.Repeat("ab", 32), Revision: 7}},
		Provenance: map[string]session.Provenance{
			"history": {Plugin: "sqlite", Version: "0.3.0", Storage: "sqlite:/var/lib/wasmhist/demo.db"},
		},
		Compactions: map[string]session.Compaction{
			"history": {Covers: 4, SHA256: strings.Repeat("cd", 32), Summary: "The user said:\nI like green tea."},
		},
	}
}

// turns returns n messages: turns of a user question, an assistant tool
// call, its result and the answer, with text of about pad bytes.
func turns(n, pad int) []abi.Message {
	out := make([]abi.Message, 0, n)
	text := strings.Repeat("x", pad)
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		for _, m := range []abi.Message{
			{Role: abi.RoleUser, Contents: []abi.Content{abi.Text(fmt.Sprintf("question %d %s", i, text))}, CreatedAt: "2026-01-02T03:04:05Z"},
			{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: id, Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}}},
			{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: id, Result: json.RawMessage(`"found"`)}}},
			{Role: abi.RoleAssistant, Contents: []abi.Content{abi.Text(fmt.Sprintf("answer %d", i))}, MessageID: fmt.Sprintf("m%d", i)},
		} {
			if len(out) < n {
				out = append(out, m)
			}
		}
	}
	return out
}

// export writes s with the given history per slot key.
func export(t testing.TB, s *session.Session, history map[string][]abi.Message) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := portable.NewWriter(&b, s)
	require.NoError(t, err)
	for _, sl := range portable.SlotsOf(s) {
		require.NoError(t, w.BeginSlot(sl.Key))
		for _, m := range history[sl.Key] {
			require.NoError(t, w.WriteMessage(m))
		}
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

// readAll reads a whole document, collecting each slot's messages.
func readAll(doc []byte, lim portable.Limits) (*session.Session, []portable.Slot, map[string][]abi.Message, error) {
	r, err := portable.NewReader(bytes.NewReader(doc), lim)
	if err != nil {
		return nil, nil, nil, err
	}
	var slots []portable.Slot
	msgs := map[string][]abi.Message{}
	for sr, err := range r.Slots() {
		if err != nil {
			return nil, nil, nil, err
		}
		slots = append(slots, sr.Slot)
		for m, err := range sr.Messages() {
			if err != nil {
				return nil, nil, nil, err
			}
			msgs[sr.Key] = append(msgs[sr.Key], m)
		}
	}
	return r.Session(), slots, msgs, nil
}

func filepathGlob(p string) ([]string, error) { return filepath.Glob(p) }

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return b
}
