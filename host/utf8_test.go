package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// TestOutputMustBeUTF8: output with bytes that are not UTF-8 is invalid
// output, refused whole, even where encoding/json would keep the bytes (a
// message or a state is kept raw) and send them on.
func TestOutputMustBeUTF8(t *testing.T) {
	h := newHost(t, host.Config{})
	f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){
		abi.ExportProvide: func([]byte) ([]byte, error) {
			return []byte(`{"messages":[{"role":"user","contents":[{"type":"text","text":"caf` + "\xe9" + `"}]}]}`), nil
		},
		abi.ExportStore: func([]byte) ([]byte, error) {
			return []byte(`{"state":{"messages":["` + "\xff" + `"]}}`), nil
		},
	}}
	p, err := h.LoadNative(context.Background(), "fake", f.handler, host.LoadOptions{})
	require.NoError(t, err)
	s := session.New()
	_, err = p.Provider("history").Provide(context.Background(), s, []abi.Message{abi.NewMessage(abi.RoleUser, "hi")})
	require.ErrorIs(t, err, host.ErrInvalidOutput)
	assert.ErrorContains(t, err, "not valid UTF-8 (byte 66)")
	err = p.Provider("history").Store(context.Background(), s, nil, nil)
	require.ErrorIs(t, err, host.ErrInvalidOutput)
	assert.Empty(t, s.State, "the session is unchanged")
}
