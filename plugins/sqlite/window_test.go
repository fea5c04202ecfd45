//go:build !wasip1

package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestProvideBodiesAsStored checks the window the plugin reads as one
// document, sliced by the bodies' stored lengths, on a real database: a
// body stored with white space (by an older plugin, or another writer),
// which the host compacts and so shortens, still comes back whole and
// compacted, with every message after it; and a system message kept ahead
// of the window, a tool call with its result, and a result whose call fell
// out of the window keep their places.
func TestProvideBodiesAsStored(t *testing.T) {
	ctx := t.Context()
	h := newHost(t)
	db := filepath.Join(t.TempDir(), "history.db")
	wasm := sdktest.BuildPlugin(t, importPath)
	p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{
		Config: json.RawMessage(`{"max_messages":4}`),
		Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})},
	})
	require.NoError(t, err)
	msgs := []string{
		`{"role":"system","contents":[{"type":"text","text":"be brief"}]}`,
		`{"role":"assistant","contents":[{"type":"function_call","call_id":"c0","name":"f","arguments":{}}]}`,
		`{"role":"tool","contents":[{"type":"function_result","call_id":"c0","result":"r0"}]}`,
		`{"role":"user","contents":[{"type":"text","text":"a \"quoted\" ], text"}]}`,
		`{"role":"assistant","contents":[{"type":"function_call","call_id":"c1","name":"f","arguments":{}}]}`,
		`{"role":"tool","contents":[{"type":"function_result","call_id":"c1","result":"r1"}]}`,
		`{"role":"assistant","contents":[{"type":"text","text":"done"}]}`,
	}
	raw := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		raw[i] = json.RawMessage(m)
	}
	facts := abi.SessionFacts{SessionID: "s", StateKey: "h"}
	state, err := p.StoreState(ctx, facts, json.RawMessage(`{}`), raw, nil)
	require.NoError(t, err)
	provide := func(t *testing.T) []string {
		got, _, err := p.ProvideState(ctx, facts, state, nil)
		require.NoError(t, err)
		var out []string
		for _, m := range got {
			out = append(out, string(m))
		}
		return out
	}
	// The window of 4: the system message, then the newest 3, of which
	// the oldest is the call c1 (the user message falls out).
	want := []string{msgs[0], msgs[4], msgs[5], msgs[6]}
	assert.Equal(t, want, provide(t), "as stored")

	conn, err := sql.Open("sqlite", "file:"+db)
	require.NoError(t, err)
	defer conn.Close()
	for _, seq := range []int{1, 5} {
		_, err = conn.Exec(`UPDATE messages SET body = replace(body, '":', '" :  ') WHERE seq = ?`, seq)
		require.NoError(t, err)
	}
	assert.Equal(t, want, provide(t), "stored with white space")

	// The window of 4 starting at a result whose call fell out: dropped.
	_, err = conn.Exec(`DELETE FROM messages WHERE seq = 7`)
	require.NoError(t, err)
	assert.Equal(t, []string{msgs[0], msgs[3], msgs[4], msgs[5]}, provide(t), "newest 3 from the user message")
	_, err = conn.Exec(`DELETE FROM messages WHERE seq = 4`)
	require.NoError(t, err)
	assert.Equal(t, []string{msgs[0], msgs[4], msgs[5]}, provide(t), "the orphan result c0 dropped")
}
