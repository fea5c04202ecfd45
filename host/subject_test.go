package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
)

// TestStoreStateKeepsOlderStates stores from the same state twice: a state
// the caller kept is never edited by a later call (the host extends only
// bytes it never hands out in place).
func TestStoreStateKeepsOlderStates(t *testing.T) {
	h := newHost(t, host.Config{})
	f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){
		abi.ExportStore: func(in []byte) ([]byte, error) {
			var req abi.StoreRequest
			if err := json.Unmarshal(in, &req); err != nil { // plugin side: an error reply, not a test failure
				return nil, abi.Errorf(abi.CodeInvalidArgument, "%v", err)
			}
			ops := []abi.PatchOp{}
			for _, m := range append(req.RequestMessages, req.ResponseMessages...) {
				ops = append(ops, abi.PatchOp{Op: abi.PatchAdd, Path: "/messages/-", Value: m})
			}
			return json.Marshal(abi.StoreResponse{StateChange: abi.StateChange{Patch: ops}})
		},
	}}
	p, err := h.LoadNative(context.Background(), "fake", f.handler, host.LoadOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	facts := abi.SessionFacts{SessionID: "s", StateKey: "k"}
	msg := func(text string) []json.RawMessage {
		b, err := json.Marshal(user(text))
		require.NoError(t, err)
		return []json.RawMessage{b}
	}
	s1, err := p.StoreState(ctx, facts, nil, msg("one"), nil)
	require.NoError(t, err)
	kept := string(s1)
	s2, err := p.StoreState(ctx, facts, s1, msg("two"), nil)
	require.NoError(t, err)
	require.Equal(t, kept, string(s1), "a later store edited the state the caller kept")
	// Storing again from the older state gives the same answer as before.
	again, err := p.StoreState(ctx, facts, s1, msg("two"), nil)
	require.NoError(t, err)
	assert.Equal(t, string(s2), string(again), "store from a kept state")
	assert.Equal(t, kept, string(s1), "the kept state changed")
	s3, err := p.StoreState(ctx, facts, s2, msg("three"), nil)
	require.NoError(t, err)
	assert.Equal(t, string(again), string(s2), "a store from s2 edited s2")
	assert.Contains(t, string(s3), "three")
}
