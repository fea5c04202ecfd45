//go:build !wasip1

package sdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// These tests drive the WebAssembly build of testdata/guest through the
// Extism runtime directly, as the reference implementation of the kernel ABI,
// to check the sdk's guest side byte for byte: input and output of every
// length modulo 8, the error encoding, recovery from panics, and capability
// calls through kernel memory. The host package runs the same plugins through
// its own loader; here the point is the guest, independent of any host code.

var (
	guestOnce     sync.Once
	guestCompiled *extism.CompiledPlugin
	guestErr      error

	// capabilityAnswer is what the test_echo host function answers; nil
	// means {"result": <request>}. Tests that set it do not run in parallel.
	capabilityAnswer func(req []byte) []byte
)

type guestPlugin struct {
	t testing.TB
	p *extism.Plugin
}

// newGuest returns a fresh instance of the guest plugin. The module is
// compiled once per test process: compiling dominates the cost of a test.
func newGuest(t testing.TB) *guestPlugin {
	t.Helper()
	guestOnce.Do(func() {
		wasm, err := sdktest.Build("./testdata/guest")
		if err != nil {
			guestErr = err
			return
		}
		// test_echo is a registered capability function, sql the built-in
		// one; both answer capabilityAnswer.
		var funcs []extism.HostFunction
		for _, name := range []string{"test_echo", abi.SQLFunction} {
			f := extism.NewHostFunctionWithStack(name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
				req, err := p.ReadBytes(stack[0])
				if err != nil {
					panic(err)
				}
				var resp []byte
				if capabilityAnswer != nil {
					resp = capabilityAnswer(req)
				} else {
					resp = append(append([]byte(`{"result":`), req...), '}')
				}
				off, err := p.WriteBytes(resp)
				if err != nil {
					panic(err)
				}
				stack[0] = off
			}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
			f.SetNamespace(abi.CapabilityModule)
			funcs = append(funcs, f)
		}
		manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmFile{Path: wasm}}}
		// An on-disk compilation cache keeps repeated runs (and -race, under
		// which compiling takes many seconds) fast.
		cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(os.TempDir(), "wasmhist-sdk-test-cache"))
		if err != nil {
			guestErr = err
			return
		}
		cfg := extism.PluginConfig{EnableWasi: true, RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(cache)}
		guestCompiled, guestErr = extism.NewCompiledPlugin(context.Background(), manifest, cfg, funcs)
	})
	require.NoError(t, guestErr, "compile guest")
	p, err := guestCompiled.Instance(t.Context(), extism.PluginInstanceConfig{})
	require.NoError(t, err, "instantiate guest")
	t.Cleanup(func() { p.Close(context.Background()) })
	return &guestPlugin{t: t, p: p}
}

// call runs an export and decodes a reported error as the host does.
func (g *guestPlugin) call(export string, input []byte) ([]byte, error) {
	g.t.Helper()
	rc, out, err := g.p.CallWithContext(g.t.Context(), export, input)
	if err != nil {
		require.EqualValues(g.t, 1, rc, "%s: rc with error %v", export, err)
		return nil, abi.DecodeError([]byte(err.Error()))
	}
	require.EqualValues(g.t, 0, rc, "%s: rc without an error", export)
	return out, nil
}

func TestGuestMarker(t *testing.T) {
	g := newGuest(t)
	rc, _, err := g.p.Call(abi.MarkerExport, nil)
	require.NoError(t, err, abi.MarkerExport)
	require.EqualValues(t, 0, rc, abi.MarkerExport, "the marker returns 0 whatever the minor (SPEC section 3)")
	for _, name := range append(append([]string{}, abi.RequiredExports()...), abi.OptionalExports()...) {
		assert.True(t, g.p.FunctionExists(name), "export %s missing", name)
	}
}

func TestGuestDescribe(t *testing.T) {
	g := newGuest(t)
	out, err := g.call(abi.ExportDescribe, nil)
	require.NoError(t, err)
	var info abi.PluginInfo
	require.NoError(t, json.Unmarshal(out, &info), "describe output %s", out)
	assert.Equal(t, "guest", info.Name)
	assert.Equal(t, abi.Version, info.ABI)
}

// TestGuestRoundTrip passes messages of every length modulo 8 through the
// guest and back: input reading, output writing and their tails.
func TestGuestRoundTrip(t *testing.T) {
	g := newGuest(t)
	for n := range 20 {
		t.Run(fmt.Sprintf("text of %d bytes", n), func(t *testing.T) {
			msg := fmt.Sprintf(`{"role":"user","text":%q}`, strings.Repeat("é", n/2)+strings.Repeat("x", n%2))
			in := `{"request_messages":[` + msg + `]}` + strings.Repeat(" ", n%3)
			out, err := g.call(abi.ExportProvide, []byte(in))
			require.NoError(t, err)
			assert.Equal(t, `{"messages":[`+msg+`]}`, string(out))
		})
	}
	big := `{"role":"user","text":"` + strings.Repeat("0123456789", 20000) + `"}`
	out, err := g.call(abi.ExportStore, []byte(`{"request_messages":[`+big+`],"response_messages":[]}`))
	require.NoError(t, err)
	want := `{"state_patch":[{"op":"add","path":"/messages/-","value":` + big + `}]}`
	// Not assert.Equal: a diff of two 200 KB strings says nothing more.
	assert.True(t, string(out) == want, "large store: output of %d bytes, want %d", len(out), len(want))
}

func TestGuestErrors(t *testing.T) {
	g := newGuest(t)
	tests := []struct {
		name    string
		export  string
		input   string
		wantErr error
		want    string
	}{
		{name: "malformed JSON", export: abi.ExportProvide, input: `{"request_messages":`, wantErr: abi.ErrInvalidArgument},
		{name: "wrong type", export: abi.ExportStore, input: `{"request_messages":"hello"}`, wantErr: abi.ErrInvalidArgument},
		{name: "describe garbage", export: abi.ExportDescribe, input: `garbage`, wantErr: abi.ErrInvalidArgument},
		{name: "provider error code", export: abi.ExportProvide, input: `{"request_messages":[{"do":"fail"}]}`, wantErr: abi.ErrNotFound, want: "asked to fail"},
		{name: "plain error", export: abi.ExportProvide, input: `{"request_messages":[{"do":"plain"}]}`, wantErr: abi.ErrInternal, want: "a plain error"},
		{name: "panic", export: abi.ExportProvide, input: `{"request_messages":[{"do":"panic"}]}`, wantErr: abi.ErrInternal, want: "asked to"},
		// The guest says where it panicked, file and line, as compiled.
		{name: "panic site", export: abi.ExportProvide, input: `{"request_messages":[{"do":"panic"}]}`, wantErr: abi.ErrInternal, want: "(at guest/main.go:"},
		{name: "optional export missing", export: abi.ExportList, input: `{}`, wantErr: abi.ErrUnimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.call(tt.export, []byte(tt.input))
			require.ErrorIs(t, err, tt.wantErr)
			require.ErrorContains(t, err, tt.want)
			// The instance keeps working after every error, a recovered
			// panic included.
			out, err := g.call(abi.ExportProvide, []byte(`{"request_messages":[{"n":1}]}`))
			require.NoError(t, err, "call after the error")
			assert.Equal(t, `{"messages":[{"n":1}]}`, string(out), "call after the error")
		})
	}
}

func TestGuestCapability(t *testing.T) {
	tests := []struct {
		name    string
		answer  func(req []byte) []byte
		message string
		want    string
		wantErr error
	}{
		{name: "result", message: `{"do":"capability"}`, want: `{"messages":[{"do":"capability"}]}`},
		{name: "built-in sql function", message: `{"do":"sql"}`, want: `{"messages":[{"do":"sql"}]}`},
		{name: "result of every tail length", message: `{"do":"capability","pad":"abc"}`, want: `{"messages":[{"do":"capability","pad":"abc"}]}`},
		{
			name:    "permission denied",
			answer:  func([]byte) []byte { return []byte(`{"error":{"code":"permission_denied","message":"not granted"}}`) },
			message: `{"do":"capability"}`, wantErr: abi.ErrPermissionDenied,
		},
		{
			name:    "malformed answer",
			answer:  func([]byte) []byte { return []byte(`{"result":`) },
			message: `{"do":"capability"}`, wantErr: abi.ErrInternal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			capabilityAnswer = tt.answer
			defer func() { capabilityAnswer = nil }()
			g := newGuest(t)
			out, err := g.call(abi.ExportProvide, []byte(`{"request_messages":[`+tt.message+`]}`))
			require.ErrorIs(t, err, tt.wantErr)
			if err == nil {
				// The request block is padded with spaces to a multiple of 8
				// bytes; the echo carries them back inside the JSON.
				assert.JSONEq(t, tt.want, string(out))
			}
		})
	}
}

// TestMinimalPluginNeedsNoCapabilities builds the README's minimal plugin and
// instantiates it with no host functions at all: a plugin that does not call
// CallCapability must not import capability functions, or it would fail to
// load on a host that offers none.
func TestMinimalPluginNeedsNoCapabilities(t *testing.T) {
	wasm := sdktest.BuildPlugin(t, "./testdata/minimal")
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmFile{Path: wasm}}}
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(os.TempDir(), "wasmhist-sdk-test-cache"))
	require.NoError(t, err)
	cfg := extism.PluginConfig{EnableWasi: true, RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(cache)}
	p, err := extism.NewPlugin(t.Context(), manifest, cfg, nil)
	require.NoError(t, err, "instantiate without host functions")
	defer p.Close(context.Background())
	_, out, err := p.Call(abi.ExportStore, []byte(`{"request_messages":[{"role":"user","contents":[]}],"response_messages":[]}`))
	require.NoError(t, err)
	assert.Equal(t, `{"state_patch":[{"op":"add","path":"/messages/-","value":{"role":"user","contents":[]}}]}`, string(out))
}

// BenchmarkGuestStore measures one store of a turn (two messages of about
// 500 bytes) through the guest side, without the host's loader and pool:
// the floor of what the sdk adds to a WebAssembly call.
func BenchmarkGuestStore(b *testing.B) {
	msg := `{"role":"user","contents":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 38) + `"}]}`
	in := []byte(`{"session":{"session_id":"s","state_key":"k"},"request_messages":[` + msg + `,` + msg + `],"response_messages":[]}`)
	g := newGuest(b).p
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		_, _, err := g.Call(abi.ExportStore, in)
		require.NoError(b, err)
	}
}

// TestReadmeShowsMinimalPlugin keeps README.md's example the program that
// TestMinimalPluginNeedsNoCapabilities builds.
func TestReadmeShowsMinimalPlugin(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "```go\n")
	block, _, ok2 := strings.Cut(block, "```")
	require.True(t, ok && ok2, "README.md has no Go block")
	src, err := os.ReadFile("testdata/minimal/main.go")
	require.NoError(t, err)
	_, code, _ := strings.Cut(string(src), "\npackage main\n")
	assert.Equal(t, block, "package main\n"+code, "README.md's minimal plugin differs from testdata/minimal/main.go (after its doc comment)")
}
