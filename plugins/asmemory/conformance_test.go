//go:build !wasip1

// Package asmemory_test checks the AssemblyScript sample plugin, which
// `make plugins` builds from assembly/ with npm (see the Makefile): the
// proof, in CI, that abi/SPEC.md alone is enough to write a plugin in
// another language than Go with the official Extism kit.
package asmemory_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// wasmFile is the plugin as `make plugins` builds it.
const wasmFile = "asmemory.wasm"

func load(t *testing.T) (*host.Host, sdktest.Factory) {
	t.Helper()
	if _, err := os.Stat(wasmFile); err != nil {
		t.Fatalf("%v: run `make plugins` first (it builds plugins/asmemory with npm)", err)
	}
	h, err := host.New(t.Context(), host.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, func(ctx context.Context) (sdktest.Subject, error) {
		return h.Load(ctx, host.File(wasmFile), host.LoadOptions{})
	}
}

// TestConformance: the plugin declares ABI 1.0 and passes every case of
// its minor. The one thing it does that a later minor forbids, refusing a
// cursor issued before clear with invalid_argument, is advice, not a
// failure (abi/SPEC.md sections 3, 4.4 and 10).
func TestConformance(t *testing.T) {
	_, f := load(t)
	for _, c := range sdktest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			v := c.Judge(t.Context(), f)
			if why, ok := sdktest.IsSkipped(v.Err); ok {
				// migrate_state is not implemented, and the failure cases
				// need runs, which a state-only plugin passes trivially
				// (`wasmhist conformance` runs them: TestConformanceAdvisesLaterMinors).
				if why != sdktest.SkipNoRuns {
					assert.Equal(t, "migrate_state_serves_result", c.Name, "only migrate_state is not implemented: %s", why)
				}
				return
			}
			require.NoError(t, v.Err)
			assert.Equal(t, "1.0", v.Declared)
			if c.Name != "clear_forgets_history" {
				assert.Empty(t, v.Advice)
				return
			}
			require.Len(t, v.Advice, 1)
			t.Logf("advice: %v", v.Advice[0])
			assert.Equal(t, sdktest.ReasonStaleCursor, v.Advice[0].Reason)
			assert.ErrorIs(t, v.Advice[0], abi.ErrInvalidArgument)
		})
	}
}

// TestKeepsTextAndDeepMessages: a conversation with multi-byte text comes
// back byte for byte, a message nested 900 levels deep is stored, and one
// nested past the plugin's bound of 1000 is refused with invalid_argument,
// not a trap.
func TestKeepsTextAndDeepMessages(t *testing.T) {
	_, f := load(t)
	s, err := f(t.Context())
	require.NoError(t, err)
	facts := abi.SessionFacts{SessionID: "s-1", StateKey: "history"}
	text := func(role, s string) json.RawMessage {
		b, err := json.Marshal(map[string]any{"role": role, "contents": []any{map[string]any{"type": "text", "text": s}}})
		require.NoError(t, err)
		return b
	}
	nested := func(depth int) json.RawMessage {
		inner := `"x"`
		for range depth - 3 {
			inner = `[` + inner + `]`
		}
		return json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"deep","x_extra":` + inner + `}]}`)
	}
	state, err := s.StoreState(t.Context(), facts, s.InitialState(),
		[]json.RawMessage{text("user", "J’aime le thé ☕"), nested(900)}, []json.RawMessage{text("assistant", "Moi aussi 😀")})
	require.NoError(t, err)
	history, _, err := s.ProvideState(t.Context(), facts, state, nil)
	require.NoError(t, err)
	require.Len(t, history, 3)
	assert.JSONEq(t, string(text("user", "J’aime le thé ☕")), string(history[0]))
	assert.JSONEq(t, string(nested(900)), string(history[1]))
	assert.JSONEq(t, string(text("assistant", "Moi aussi 😀")), string(history[2]))

	_, err = s.StoreState(t.Context(), facts, state, []json.RawMessage{nested(1100)}, nil)
	require.ErrorIs(t, err, abi.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "nested deeper than 1000")
}

// TestBuiltWithoutStartFunction: the build exports its initialisation as
// _initialize (--exportStart) instead of a start section, so the host
// compiles it with its own interrupt checks rather than wazero's slower
// preemption (abi/SPEC.md sections 2.4 and 9), and it imports nothing
// from "env".
func TestBuiltWithoutStartFunction(t *testing.T) {
	b, err := os.ReadFile(wasmFile)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")), "not a WebAssembly module")
	var sections []byte
	var importSection, exportSection []byte
	for r := bytes.NewReader(b[8:]); r.Len() > 0; {
		id, err := r.ReadByte()
		require.NoError(t, err)
		n, err := binary.ReadUvarint(r)
		require.NoError(t, err)
		body := make([]byte, n)
		_, err = r.Read(body)
		require.NoError(t, err)
		sections = append(sections, id)
		switch id {
		case 2:
			importSection = body
		case 7:
			exportSection = body
		}
	}
	assert.NotContains(t, sections, byte(8), "the module has a start section: build with --exportStart _initialize")
	assert.Contains(t, string(exportSection), "_initialize")
	assert.Contains(t, string(importSection), "extism:host/env")
	assert.NotContains(t, string(importSection), "\x03env", "imports from module env, which the host refuses")
}
