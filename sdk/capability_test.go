package sdk

import (
	"errors"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
)

func TestCallCapabilityNative(t *testing.T) {
	if _, err := CallCapability("nothing_registered", []byte(`{}`)); !errors.Is(err, abi.ErrUnimplemented) {
		t.Fatalf("unregistered: err = %v, want ErrUnimplemented", err)
	}
	defer delete(capabilityFuncs, "test_native")
	RegisterCapabilityFunc("test_native", func(uint64) uint64 { t.Fatal("a native build called an import"); return 0 })
	if _, err := CallCapability("test_native", []byte(`{}`)); !errors.Is(err, abi.ErrUnimplemented) {
		t.Fatalf("native: err = %v, want ErrUnimplemented", err)
	}
}

func TestDecodeCapabilityResponse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr error
	}{
		{name: "result", in: `{"result":{"rows":[[1]]}}`, want: `{"rows":[[1]]}`},
		{name: "result with trailing padding", in: `{"result":1}   `, want: `1`},
		{name: "error keeps its code", in: `{"error":{"code":"permission_denied","message":"not granted"}}`, wantErr: abi.ErrPermissionDenied},
		{name: "unknown code is internal", in: `{"error":{"code":"teapot","message":"?"}}`, wantErr: abi.ErrInternal},
		{name: "malformed", in: `{"result":`, wantErr: abi.ErrInternal},
		{name: "empty result", in: `{"result":}`, wantErr: abi.ErrInternal},
		{name: "braces inside strings", in: `{"result":{"a":"}{"}}`, want: `{"a":"}{"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeCapabilityResponse("sql", []byte(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRegisterCapabilityFuncDuplicate(t *testing.T) {
	defer delete(capabilityFuncs, "test_dup")
	RegisterCapabilityFunc("test_dup", func(uint64) uint64 { return 0 })
	defer func() {
		if recover() == nil {
			t.Fatal("a duplicate registration did not panic")
		}
	}()
	RegisterCapabilityFunc("test_dup", func(uint64) uint64 { return 0 })
}
