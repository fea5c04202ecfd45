package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
)

// fakePlugin is a native plugin whose behaviour a test sets per export.
type fakePlugin struct {
	info    abi.PluginInfo
	exports map[string]func(input []byte) ([]byte, error)
}

func (f *fakePlugin) handler(_ context.Context, export string, input []byte) ([]byte, error) {
	if export == abi.ExportDescribe {
		return json.Marshal(f.info)
	}
	if fn, ok := f.exports[export]; ok {
		return fn(input)
	}
	return nil, abi.Errorf(abi.CodeUnimplemented, "%s", export)
}

func baseInfo() abi.PluginInfo {
	return abi.PluginInfo{Name: "fake", Version: "1", ABI: abi.Version, StateVersion: 2,
		StateSchema:  json.RawMessage(`{"type":"object","properties":{"messages":{"type":"array"},"v":{"type":"integer"}},"required":["messages"]}`),
		InitialState: json.RawMessage(`{"messages":[]}`)}
}

func TestNativeDescribeChecks(t *testing.T) {
	h := newHost(t, host.Config{})
	tests := []struct {
		name     string
		edit     func(*abi.PluginInfo)
		opts     host.LoadOptions
		want     error
		mentions string
	}{
		{"newer minor", func(i *abi.PluginInfo) { i.ABI = "1.99" }, host.LoadOptions{}, host.ErrVersionMismatch, "upgrade the host"},
		{"older major", func(i *abi.PluginInfo) { i.ABI = "0.1" }, host.LoadOptions{}, host.ErrVersionMismatch, "rebuild the plugin"},
		{"capability not granted", func(i *abi.PluginInfo) { i.Capabilities = []abi.Capability{abi.CapabilitySQL} }, host.LoadOptions{}, host.ErrCapabilityDenied, "sql"},
		{"state schema does not compile", func(i *abi.PluginInfo) { i.StateSchema = json.RawMessage(`{"type": 12}`) }, host.LoadOptions{}, host.ErrInvalidPlugin, "state_schema"},
		{"initial state invalid", func(i *abi.PluginInfo) { i.InitialState = json.RawMessage(`{}`) }, host.LoadOptions{}, host.ErrInvalidPlugin, "initial_state"},
		{"config not an object", func(*abi.PluginInfo) {}, host.LoadOptions{Config: json.RawMessage(`[1]`)}, host.ErrInvalidConfig, "object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakePlugin{info: baseInfo()}
			tt.edit(&f.info)
			_, err := h.LoadNative(context.Background(), "fake", f.handler, tt.opts)
			require.ErrorIs(t, err, tt.want)
			assert.ErrorContains(t, err, tt.mentions)
		})
	}
}

func TestOptionalExports(t *testing.T) {
	h := newHost(t, host.Config{})
	f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){}}
	p, err := h.LoadNative(context.Background(), "fake", f.handler, host.LoadOptions{})
	require.NoError(t, err)
	s := &session.Session{SessionID: "s"}
	_, _, err = p.List(context.Background(), s, "k", "", 10)
	assert.ErrorIs(t, err, host.ErrUnsupported, "list")
	assert.ErrorIs(t, p.Clear(context.Background(), s, "k"), host.ErrUnsupported, "clear")
	f.exports[abi.ExportList] = func([]byte) ([]byte, error) {
		return []byte(`{"messages":[{"role":"user","contents":[{"type":"text","text":"hi"}]}],"next_cursor":"2"}`), nil
	}
	msgs, next, err := p.List(context.Background(), s, "k", "", 10)
	assert.NoError(t, err, "list")
	if assert.Len(t, msgs, 1, "list") {
		assert.Equal(t, "hi", msgs[0].TextContent(), "list")
	}
	assert.Equal(t, "2", next, "list cursor")
	f.exports[abi.ExportList] = func([]byte) ([]byte, error) {
		return []byte(`{"messages":[{"role":"wizard","contents":[]}]}`), nil
	}
	_, _, err = p.List(context.Background(), s, "k", "", 10)
	assert.ErrorIs(t, err, host.ErrInvalidOutput, "list with a bad message")
	assert.ErrorContains(t, err, "messages[0]", "list with a bad message")
}

// TestMigrateAndPatch: an older slot is migrated before the call, and a
// state patch from provide is applied and validated.
func TestMigrateAndPatch(t *testing.T) {
	h := newHost(t, host.Config{})
	var migrated int
	f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){
		abi.ExportMigrateState: func(in []byte) ([]byte, error) {
			var req abi.MigrateStateRequest
			if err := json.Unmarshal(in, &req); err != nil || req.FromVersion != 1 {
				return nil, abi.Errorf(abi.CodeInvalidArgument, "bad request %s", in)
			}
			migrated++
			return []byte(`{"state":{"messages":[{"role":"user","contents":[{"type":"text","text":"old"}]}]}}`), nil
		},
		abi.ExportProvide: func([]byte) ([]byte, error) {
			return []byte(`{"from_state":{"pointer":"/messages"},"state_patch":[{"op":"add","path":"/v","value":3}]}`), nil
		},
	}}
	p, err := h.LoadNative(context.Background(), "fake", f.handler, host.LoadOptions{})
	require.NoError(t, err)
	s := &session.Session{SessionID: "s", State: map[string]session.ProviderState{
		"k": {Provider: "fake", StateVersion: 1, Data: json.RawMessage(`{"old":true}`)},
	}}
	hist, err := p.Provider("k").Provide(context.Background(), s, []abi.Message{user("new")})
	require.NoError(t, err)
	require.Equal(t, 1, migrated, "migrations")
	require.Len(t, hist, 1, "history")
	require.Equal(t, "old", hist[0].TextContent(), "history")
	slot := s.State["k"]
	var st struct {
		V int `json:"v"`
	}
	json.Unmarshal(slot.Data, &st)
	assert.Equal(t, 2, slot.StateVersion, "slot after provide: %+v", slot)
	assert.Equal(t, 3, st.V, "slot after provide: %+v", slot)
	// A patch that breaks the schema is invalid output, and changes nothing.
	f.exports[abi.ExportProvide] = func([]byte) ([]byte, error) {
		return []byte(`{"state_patch":[{"op":"replace","path":"/messages","value":"x"}]}`), nil
	}
	before := s.Clone()
	_, err = p.Provider("k").Provide(context.Background(), s, nil)
	require.ErrorIs(t, err, host.ErrInvalidOutput, "bad patch")
	assert.Equal(t, string(before.State["k"].Data), string(s.State["k"].Data), "bad patch changed the session")
}

func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := newHost(t, host.Config{TracerProvider: tp})
	f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){
		abi.ExportStore: func([]byte) ([]byte, error) { return nil, abi.Errorf(abi.CodeUnavailable, "db down") },
	}}
	p, err := h.LoadNative(context.Background(), "fake", f.handler, host.LoadOptions{})
	require.NoError(t, err)
	err = p.Provider("k").Store(context.Background(), &session.Session{SessionID: "s"}, []abi.Message{user("x")}, nil)
	require.ErrorIs(t, err, abi.ErrUnavailable, "store")
	spans := rec.Ended()
	require.Len(t, spans, 2, "want describe and store spans")
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range spans[1].Attributes() {
		attrs[kv.Key] = kv.Value
	}
	want := map[attribute.Key]string{
		"wasmhist.plugin":  "fake",
		"wasmhist.export":  "store",
		"wasmhist.outcome": "plugin_error:unavailable",
	}
	for k, v := range want {
		assert.Equal(t, v, attrs[k].AsString(), "attribute %s", k)
	}
	assert.NotZero(t, attrs["wasmhist.bytes_in"].AsInt64(), "bytes_in not recorded")
	assert.Contains(t, attrs, attribute.Key("wasmhist.duration_ms"), "duration not recorded")
	assert.Equal(t, "Error", spans[1].Status().Code.String(), "status %v", spans[1].Status())
}

// TestCallLogs: a logger at Debug gets a record of every call, one at Warn
// only of the calls that failed (the arguments of a record nobody logs are
// not built).
func TestCallLogs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level
		want  []string
	}{
		{"debug", slog.LevelDebug, []string{"plugin call export=describe", "plugin call export=provide", "plugin call failed export=store"}},
		{"warn", slog.LevelWarn, []string{"plugin call failed export=store"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))
			h := newHost(t, host.Config{Logger: log})
			f := &fakePlugin{info: baseInfo(), exports: map[string]func([]byte) ([]byte, error){
				abi.ExportProvide: func([]byte) ([]byte, error) { return []byte(`{}`), nil },
				abi.ExportStore:   func([]byte) ([]byte, error) { return nil, abi.Errorf(abi.CodeUnavailable, "db down") },
			}}
			p, err := h.LoadNative(context.Background(), "fake", f.handler, host.LoadOptions{})
			require.NoError(t, err)
			s := &session.Session{SessionID: "s"}
			_, err = p.Provider("k").Provide(context.Background(), s, nil)
			require.NoError(t, err)
			require.Error(t, p.Provider("k").Store(context.Background(), s, []abi.Message{user("x")}, nil))
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				msg := line[strings.Index(line, "msg=")+len("msg="):]
				if !strings.HasPrefix(msg, `"plugin call`) {
					continue
				}
				msg = strings.Trim(msg[:strings.Index(msg, " plugin=")], `"`)
				export := line[strings.Index(line, "export=")+len("export="):]
				got = append(got, msg+" export="+export[:strings.IndexByte(export, ' ')])
				assert.Contains(t, line, "bytes_in=", "%s", line)
				assert.Contains(t, line, "duration=", "%s", line)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestHammerWasm runs many sessions through one WebAssembly plugin at once:
// instances are never shared, and every session ends with exactly its own
// messages.
func TestHammerWasm(t *testing.T) {
	h := newHost(t, host.Config{Limits: host.Limits{MaxInstances: 3, MaxIdleInstances: 2}})
	p := loadHostile(t, h, "misbehave", host.LoadOptions{})
	const workers, rounds = 6, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &session.Session{SessionID: fmt.Sprint("s", w)}
			prov := p.Provider("k")
			for r := range rounds {
				// assert, not require: FailNow must not run off the test's goroutine.
				err := prov.Store(context.Background(), s, []abi.Message{user(fmt.Sprint(w, "-", r))}, nil)
				if !assert.NoError(t, err, "worker %d: store", w) {
					return
				}
			}
			hist, err := prov.Provide(context.Background(), s, nil)
			if !assert.NoError(t, err, "worker %d: provide", w) {
				return
			}
			if assert.Len(t, hist, rounds, "worker %d: history", w) {
				assert.Equal(t, fmt.Sprint(w, "-", rounds-1), hist[rounds-1].TextContent(), "worker %d: last message", w)
			}
		}()
	}
	wg.Wait()
}
