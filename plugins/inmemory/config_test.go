//go:build !wasip1

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
)

func loadNative(t *testing.T, config string) (*host.Plugin, error) {
	t.Helper()
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h.LoadNative(t.Context(), provider.Name, sdk.Handler(provider.Provider{}), host.LoadOptions{Config: json.RawMessage(config)})
}

// TestConfigSchema checks the plugin's config schema as the host applies it
// at load: a config the plugin would misread is refused before any call.
func TestConfigSchema(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		wantErr error
	}{
		{name: "none", config: ``},
		{name: "empty", config: `{}`},
		{name: "both bounds", config: `{"max_messages":20,"max_tokens":4000}`},
		{name: "negative", config: `{"max_messages":-1}`, wantErr: host.ErrInvalidConfig},
		{name: "not an integer", config: `{"max_tokens":1.5}`, wantErr: host.ErrInvalidConfig},
		{name: "unknown field", config: `{"max_message":20}`, wantErr: host.ErrInvalidConfig},
		{name: "not an object", config: `[]`, wantErr: host.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadNative(t, tt.config)
			require.ErrorIs(t, err, tt.wantErr, "load with config %s", tt.config)
		})
	}
}

// TestConfiguredWindow checks that the configured window reaches the host:
// with max_messages 3 the host returns the system message and the newest
// messages that fit, never more than 3.
func TestConfiguredWindow(t *testing.T) {
	p, err := loadNative(t, `{"max_messages":3}`)
	require.NoError(t, err)
	facts := abi.SessionFacts{SessionID: "s", StateKey: "history"}
	text := func(role abi.Role, s string) json.RawMessage {
		b, err := json.Marshal(abi.NewMessage(role, s))
		require.NoError(t, err)
		return b
	}
	state := p.InitialState()
	state, err = p.StoreState(t.Context(), facts, state, []json.RawMessage{text(abi.RoleSystem, "sys")}, nil)
	require.NoError(t, err)
	for i := range 4 {
		state, err = p.StoreState(t.Context(), facts, state,
			[]json.RawMessage{text(abi.RoleUser, fmt.Sprint("q", i))}, []json.RawMessage{text(abi.RoleAssistant, fmt.Sprint("a", i))})
		require.NoError(t, err)
	}
	history, _, err := p.ProvideState(t.Context(), facts, state, nil)
	require.NoError(t, err)
	var got []string
	for _, raw := range history {
		var m abi.Message
		require.NoError(t, json.Unmarshal(raw, &m))
		got = append(got, m.TextContent())
	}
	assert.Equal(t, []string{"sys", "q3", "a3"}, got, "windowed history")
}
