package wasmrt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
)

type echoGrant struct{ began *int }

func (g echoGrant) Capability() abi.Capability { return "echo" }
func (g echoGrant) Begin(context.Context, capability.Backend) (capability.Session, error) {
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
			require.NoError(t, err)
			defer in.Close(ctx)
			call := capability.NewCall(context.Background(), "capcall", tt.grants, echoBackends)
			out, err := in.Call(capability.WithCall(ctx, call), abi.ExportProvide, []byte(tt.input))
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(out))
			require.NoError(t, call.End(ctx, true))
		})
	}
	assert.Equal(t, 2, began, "the grant begins once per granted call")
}

// echoBackends serve the echo capability, which opens nothing.
var echoBackends = capability.NewBackends([]capability.Kind{{
	Func:       echoFunc,
	NewBackend: func() (capability.Backend, error) { return nopBackend{}, nil },
}})

type nopBackend struct{}

func (nopBackend) Close() error { return nil }

// TestEncodeResponseIsWhatJSONMarshalWrites: a capability's response is
// written by hand around the host-built result: what json.Marshal wrote of
// it, byte for byte but for its HTML escaping, which changes no value.
func TestEncodeResponseIsWhatJSONMarshalWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp capabilityResponse
	}{
		{"result", capabilityResponse{Result: json.RawMessage(`{"rows":[[1,"a\u003cb",null]],"json":{"role":"user"}}`)}},
		{"null result", capabilityResponse{Result: json.RawMessage(`null`)}},
		{"html in strings", capabilityResponse{Result: json.RawMessage(`{"rows":[["<b>&amp;</b>"]]}`)}},
		{"no result", capabilityResponse{}},
		{"error", capabilityResponse{Error: abi.Errorf(abi.CodeInvalidArgument, "sql: <bad> \"statement\"")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(tc.resp))
			got := encodeResponse(tc.resp)
			// A response written into kernel memory is the same bytes,
			// in a block of its own, between blocks left as they were.
			k := newKernel(1<<20, nil)
			before := k.write([]byte("before"))
			off := k.writeResponse(tc.resp)
			after := k.write([]byte("after"))
			require.NotZero(t, off)
			assert.Equal(t, string(got), string(k.bytes(off, k.length(off))))
			assert.Equal(t, "before", string(k.bytes(before, k.length(before))))
			assert.Equal(t, "after", string(k.bytes(after, k.length(after))))
			want, err := json.Marshal(tc.resp)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(got))
			if tc.resp.Error != nil {
				assert.Equal(t, string(want), string(got))
			} else {
				assert.Equal(t, strings.TrimSuffix(buf.String(), "\n"), string(got))
			}
		})
	}
}

// TestDirectCapabilityCalls: a plugin that exports the buffer of direct
// capability calls (SPEC section 2.6) gets its requests read from it and
// its responses written into it when they fit, and through the kernel
// otherwise; a buffer outside its memory is never used.
func TestDirectCapabilityCalls(t *testing.T) {
	for _, kind := range engineKinds {
		t.Run(kind, func(t *testing.T) {
			m := compileOn(t, kind, hostileWasm(t, "capdirect"), testPages)
			ctx := context.Background()
			var began int
			long := `{"pad":"` + strings.Repeat("x", 80) + `"}`
			tests := []struct {
				name  string
				input []string // calls on one instance
				want  string   // the last call's output
			}{
				{"both ways direct", []string{`{"x":1}`}, `{"direct":true,"response":{"result":{"plugin":"capdirect","request":{"x":1}}}}`},
				{"error answer direct", []string{`"fail"`}, `{"direct":true,"response":{"error":{"code":"unavailable","message":"asked to fail"}}}`},
				{"buffer asked for once", []string{`{"x":1}`, `{"y":2}`}, `{"direct":true,"response":{"result":{"plugin":"capdirect","request":{"y":2}}}}`},
				{"too large: the kernel", []string{long}, `{"direct":false,"response":{"result":{"plugin":"capdirect","request":` + long + `}}}`},
				{"small request, response too large", []string{`{"z":"` + strings.Repeat("z", 20) + `"}`},
					`{"direct":false,"response":{"result":{"plugin":"capdirect","request":{"z":"` + strings.Repeat("z", 20) + `"}}}}`},
				{"buffer outside memory", []string{`"outside"`}, `{"direct":false,"response":{"result":{"plugin":"capdirect","request":null}}}`},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					in, err := m.NewInstance(ctx, testPages)
					require.NoError(t, err)
					defer in.Close(ctx)
					var out []byte
					for _, input := range tt.input {
						call := capability.NewCall(context.Background(), "capdirect", []capability.Grant{echoGrant{&began}}, echoBackends)
						out, err = in.Call(capability.WithCall(ctx, call), abi.ExportProvide, []byte(input))
						require.NoError(t, err)
						require.NoError(t, call.End(ctx, true))
					}
					assert.Equal(t, tt.want, string(out))
				})
			}
		})
	}
}

// TestSDKGuestCapabilityCallsAreDirect: a plugin built with the Go SDK
// passes a capability call that fits its buffer without a kernel block
// (kernel memory ends where the call's input does), and one that does not
// through the kernel, with the same answer.
func TestSDKGuestCapabilityCallsAreDirect(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(userCache(t), []capability.Func{
		{Capability: "echo", Name: "test_echo", Call: echoCall},
		{Capability: "echo", Name: abi.SQLFunction, Call: echoCall},
	})
	t.Cleanup(func() { e.Close(ctx) })
	e.interpretFirst = false
	wasm := buildWasm(t, "../../../sdk/testdata/guest")
	m, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
	require.NoError(t, err)
	t.Cleanup(func() { m.Release(ctx) })
	var began int
	tests := []struct {
		name   string
		pad    int
		direct bool
	}{
		{"fits the buffer", 100, true},
		{"larger than the buffer", 70 << 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			msg := `{"do":"capability","pad":"` + strings.Repeat("p", tt.pad) + `"}`
			input := []byte(`{"request_messages":[` + msg + `]}`)
			for range 2 { // the buffer is asked for on the first call
				call := capability.NewCall(context.Background(), "guest", []capability.Grant{echoGrant{&began}}, echoBackends)
				out, err := in.Call(capability.WithCall(ctx, call), abi.ExportProvide, input)
				require.NoError(t, err)
				require.NoError(t, call.End(ctx, true))
				assert.Equal(t, `{"messages":[{"plugin":"guest","request":`+msg+`}]}`, string(out))
				inputEnd := uint64(kernelAlign) + (uint64(len(input))+kernelAlign-1)&^(kernelAlign-1)
				if tt.direct {
					assert.Equal(t, inputEnd, in.kern.top, "kernel memory holds the input only")
				} else {
					assert.Greater(t, in.kern.top, inputEnd, "the request went through the kernel")
				}
			}
		})
	}
}

// TestCapabilityBufferUnderTheDeadline: asking a plugin for its buffer of
// direct capability calls runs within the first call's deadline, on the
// compiler's code and the interpreter's: a plugin that never answers is
// stopped, and its call fails as a timeout.
func TestCapabilityBufferUnderTheDeadline(t *testing.T) {
	for _, kind := range engineKinds {
		t.Run(kind, func(t *testing.T) {
			m := compileOn(t, kind, hostileWasm(t, "capdirect"), testPages)
			ctx := context.Background()
			in, err := m.NewInstance(ctx, testPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			var began int
			call := capability.NewCall(context.Background(), "capdirect", []capability.Grant{echoGrant{&began}}, echoBackends)
			_, err = in.Call(capability.WithCall(cctx, call), abi.ExportProvide, []byte(`"loop"`))
			// Only the buffer's export loops: provide answers "loop" at once.
			require.ErrorIs(t, err, hosterr.ErrTimeout)
			require.NoError(t, call.End(ctx, false))
		})
	}
}
