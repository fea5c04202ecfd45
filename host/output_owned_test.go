package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
)

// TestNativeOutputReusedBuffer: a native handler may return the same
// buffer from every call, overwritten each time. What the host keeps of a
// response (a state, the messages of a provide) must not change when the
// handler writes the next one: the host decodes a copy.
func TestNativeOutputReusedBuffer(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, host.Config{})
	buf := make([]byte, 0, 256)
	calls := 0
	respond := func(format string) func([]byte) ([]byte, error) {
		return func([]byte) ([]byte, error) {
			calls++
			buf = fmt.Appendf(buf[:0], format, calls, calls)
			return buf, nil
		}
	}
	f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){
		abi.ExportStore: respond(`{"state":{"messages":[],"v":%d%d}}`),
		abi.ExportProvide: respond(`{"messages":[{"role":"user","contents":[{"type":"text","text":"call %d%d"}]}],` +
			`"state":{"messages":[],"v":7}}`),
	}}
	p, err := h.LoadNative(ctx, "fake", f.handler, host.LoadOptions{})
	require.NoError(t, err)
	facts := abi.SessionFacts{SessionID: "s"}

	first, err := p.StoreState(ctx, facts, nil, nil, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"messages":[],"v":11}`, string(first))
	msgs, state, err := p.ProvideState(ctx, facts, first, []json.RawMessage{json.RawMessage(`{"role":"user","contents":[]}`)})
	require.NoError(t, err)
	_, err = p.StoreState(ctx, facts, state, nil, nil)
	require.NoError(t, err)

	require.JSONEq(t, `{"messages":[],"v":11}`, string(first), "the first store's state changed with the handler's next response")
	require.Len(t, msgs, 1)
	require.JSONEq(t, `{"role":"user","contents":[{"type":"text","text":"call 22"}]}`, string(msgs[0]), "provide's messages changed with the handler's next response")
	require.JSONEq(t, `{"messages":[],"v":7}`, string(state), "provide's state changed with the handler's next response")
}
