package wasmrt

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
)

// Host functions are bound at compile time, so the test capability is
// registered before any test compiles a module.
func TestMain(m *testing.M) {
	if err := Register(capability.Func{Capability: "echo", Name: "echo", Call: echoCall}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

type echoGrant struct{ began *int }

func (g echoGrant) Capability() abi.Capability { return "echo" }
func (g echoGrant) Begin(context.Context) (capability.Session, error) {
	*g.began++
	return echoSession{}, nil
}

type echoSession struct{}

func (echoSession) End(context.Context, bool) error { return nil }

func echoCall(_ context.Context, call *capability.Call, req []byte) ([]byte, error) {
	if string(req) == `"fail"` {
		return nil, abi.Errorf(abi.CodeUnavailable, "asked to fail")
	}
	return json.Marshal(map[string]any{"plugin": call.Plugin, "request": json.RawMessage(req)})
}

func TestCapabilityHostFunction(t *testing.T) {
	m := compileHostile(t, "capcall")
	ctx := context.Background()
	var began int
	tests := []struct {
		name   string
		grants []capability.Grant
		input  string
		want   string
	}{
		{"granted", []capability.Grant{echoGrant{&began}}, `{"x":1}`, `{"result":{"plugin":"capcall","request":{"x":1}}}`},
		{"error answer", []capability.Grant{echoGrant{&began}}, `"fail"`, `{"error":{"code":"unavailable","message":"asked to fail"}}`},
		{"not granted", nil, `{}`, `{"error":{"code":"permission_denied","message":"plugin \"capcall\" was not granted capability \"echo\""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := m.NewInstance(ctx, testPages)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close(ctx)
			call := capability.NewCall("capcall", tt.grants)
			out, err := in.Call(capability.WithCall(ctx, call), abi.ExportProvide, []byte(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("got %s\nwant %s", out, tt.want)
			}
			if err := call.End(ctx, true); err != nil {
				t.Fatal(err)
			}
		})
	}
	if began != 2 {
		t.Errorf("grant began %d times, want once per granted call", began)
	}
	if err := Register(capability.Func{Name: "late"}); !errors.Is(err, errFrozen) {
		t.Errorf("Register after compile: %v", err)
	}
}
