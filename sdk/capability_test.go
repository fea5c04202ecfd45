package sdk

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

func TestCallCapabilityNative(t *testing.T) {
	_, err := CallCapability("nothing_registered", []byte(`{}`))
	assert.ErrorIs(t, err, abi.ErrUnimplemented, "unregistered")
	defer delete(capabilityFuncs, "test_native")
	RegisterCapabilityFunc("test_native", func(uint64) uint64 { require.Fail(t, "a native build called an import"); return 0 })
	_, err = CallCapability("test_native", []byte(`{}`))
	assert.ErrorIs(t, err, abi.ErrUnimplemented, "native")
}

func TestDecodeCapabilityResponse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr error
		errText string // the error's text, when it is one
	}{
		{name: "result", in: `{"result":{"rows":[[1]]}}`, want: `{"rows":[[1]]}`},
		{name: "result with trailing padding", in: `{"result":1}   `, want: `1`},
		{name: "error keeps its code", in: `{"error":{"code":"permission_denied","message":"not granted"}}`, wantErr: abi.ErrPermissionDenied,
			errText: "sdk: call capability sql: permission_denied: not granted"},
		{name: "error members in any order", in: ` {"error": {"message":"no row", "x":[1,{}], "code":"not_found"}, "result": null} `, wantErr: abi.ErrNotFound,
			errText: "sdk: call capability sql: not_found: no row"},
		{name: "unknown code is internal", in: `{"error":{"code":"teapot","message":"?"}}`, wantErr: abi.ErrInternal,
			errText: `sdk: call capability sql: internal: unknown code "teapot": ?`},
		{name: "null error", in: `{"error":null,"result":[2]}`, want: `[2]`},
		{name: "malformed", in: `{"result":`, wantErr: abi.ErrInternal,
			errText: "sdk: call capability sql: internal error: malformed response: malformed JSON at offset 10: unexpected end of input"},
		{name: "error not an object", in: `{"error":"boom"}`, wantErr: abi.ErrInternal,
			errText: "sdk: call capability sql: internal error: malformed response: malformed JSON at offset 9: error: want an object"},
		{name: "empty result", in: `{"result":}`, wantErr: abi.ErrInternal},
		{name: "braces inside strings", in: `{"result":{"a":"}{"}}`, want: `{"a":"}{"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeCapabilityResponse("sql", []byte(tt.in))
			require.ErrorIs(t, err, tt.wantErr)
			if tt.errText != "" {
				assert.EqualError(t, err, tt.errText)
			}
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestRegisterCapabilityFuncDuplicate(t *testing.T) {
	defer delete(capabilityFuncs, "test_dup")
	RegisterCapabilityFunc("test_dup", func(uint64) uint64 { return 0 })
	assert.Panics(t, func() { RegisterCapabilityFunc("test_dup", func(uint64) uint64 { return 0 }) }, "a duplicate registration must panic")
}
