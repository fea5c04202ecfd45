package host_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
)

// TestStoreStateKeepsOlderStates stores from the same state twice: the raw
// state API hands out copies, so a state the caller kept is never edited by
// a later call (the host extends only bytes it owns in place).
func TestStoreStateKeepsOlderStates(t *testing.T) {
	h := newHost(t, host.Config{})
	f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){
		abi.ExportStore: func(in []byte) ([]byte, error) {
			var req abi.StoreRequest
			if err := json.Unmarshal(in, &req); err != nil {
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
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	facts := abi.SessionFacts{SessionID: "s", StateKey: "k"}
	msg := func(text string) []json.RawMessage {
		b, _ := json.Marshal(user(text))
		return []json.RawMessage{b}
	}
	s1, err := p.StoreState(ctx, facts, nil, msg("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := string(s1)
	s2, err := p.StoreState(ctx, facts, s1, msg("two"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(s1) != kept {
		t.Fatalf("a later store edited the state the caller kept:\n got %s\nwant %s", s1, kept)
	}
	// Storing again from the older state gives the same answer as before.
	again, err := p.StoreState(ctx, facts, s1, msg("two"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(s2) || string(s1) != kept {
		t.Fatalf("store from a kept state: got %s, want %s (kept state now %s)", again, s2, s1)
	}
}
