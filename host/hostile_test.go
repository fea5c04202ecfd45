package host_test

import (
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

var _ sdktest.Subject = (*host.Plugin)(nil)

// hostileWasm builds each hostile plugin once per test binary.
var hostileWasm = struct {
	sync.Mutex
	paths map[string]string
}{paths: map[string]string{}}

func hostilePath(t testing.TB, name string) string {
	t.Helper()
	hostileWasm.Lock()
	defer hostileWasm.Unlock()
	if p, ok := hostileWasm.paths[name]; ok {
		return p
	}
	p := sdktest.BuildPlugin(t, "./testdata/hostile/"+name)
	hostileWasm.paths[name] = p
	return p
}

func newHost(t testing.TB, cfg host.Config) *host.Host {
	t.Helper()
	h, err := host.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func loadHostile(t testing.TB, h *host.Host, name string, opts host.LoadOptions) *host.Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), host.File(hostilePath(t, name)), opts)
	require.NoError(t, err)
	return p
}

// warmCompiled loads the plugin at path in a host of its own and closes
// it, which waits for the compilation the first use started: later loads
// from the cache run the compiler's code from their first call.
func warmCompiled(t testing.TB, path string, opts host.LoadOptions) {
	t.Helper()
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	p, err := h.Load(ctx, host.File(path), opts)
	require.NoError(t, err)
	require.NoError(t, p.Compiled(ctx))
	require.NoError(t, h.Close(ctx))
}

func user(text string) abi.Message { return abi.NewMessage(abi.RoleUser, text) }

func sessionJSON(t *testing.T, s *session.Session) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return b
}

// TestHostilePlugin makes one plugin misbehave in every way it can during
// a call. Each way must give its own error, leave the session byte for byte
// as it was, and leave the plugin usable: the next call gets a fresh
// instance and works.
func TestHostilePlugin(t *testing.T) {
	h := newHost(t, host.Config{Limits: host.Limits{MaxOutputBytes: 256 << 10}})
	// The spinning case gets a short deadline of its own so the test stays
	// fast; the others keep the default so that a slow machine (or the
	// race detector) cannot turn their failure into a timeout.
	// A small memory limit keeps the hog's work short.
	// Compiled first: the spinning case's 300 ms are for its loop, not
	// for a first use's calls on the interpreter (describe, and the guest
	// runtime's start, take far longer there under the race detector).
	warmCompiled(t, hostilePath(t, "misbehave"), host.LoadOptions{})
	p := loadHostile(t, h, "misbehave", host.LoadOptions{Limits: host.Limits{MemoryPages: 128}})
	spin := loadHostile(t, h, "misbehave", host.LoadOptions{Limits: host.Limits{CallTimeout: 300 * time.Millisecond}})
	ctx := context.Background()

	tests := []struct {
		name    string
		trigger string
		want    error
		notWant []error
	}{
		{"infinite loop", "loop", host.ErrTimeout, nil},
		{"memory hog", "hog", host.ErrMemoryLimit, []error{host.ErrTrap}},
		{"output bomb", "bomb", host.ErrOutputTooLarge, nil},
		{"invalid JSON", "badjson", host.ErrInvalidOutput, nil},
		{"state violating its schema", "badstate", host.ErrInvalidOutput, nil},
		{"panic", "panic", host.ErrTrap, []error{host.ErrMemoryLimit}},
		{"plugin error", "error", abi.ErrNotFound, []error{host.ErrTrap}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prov := p.Provider("primary")
			if tt.trigger == "loop" {
				prov = spin.Provider("primary")
			}
			s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "s-" + tt.trigger}
			require.NoError(t, prov.Store(ctx, s, []abi.Message{user("hello")}, nil), "store before")
			before := sessionJSON(t, s)

			var gcs atomic.Int64
			stop := make(chan struct{})
			done := make(chan struct{})
			if tt.trigger == "loop" {
				// A spinning guest must not stall the collector's
				// stop-the-world for longer than the call's deadline.
				go func() {
					defer close(done)
					for {
						select {
						case <-stop:
							return
						default:
							runtime.GC()
							gcs.Add(1)
						}
					}
				}()
			} else {
				close(done)
			}
			err := prov.Store(ctx, s, []abi.Message{user("hostile:" + tt.trigger)}, nil)
			close(stop)
			<-done
			require.ErrorIs(t, err, tt.want)
			for _, nw := range tt.notWant {
				assert.NotErrorIs(t, err, nw)
			}
			var pe *host.PluginError
			if assert.ErrorAs(t, err, &pe, "the error is a PluginError") {
				assert.Equal(t, "misbehave", pe.Plugin, "the PluginError names the plugin")
				assert.Equal(t, abi.ExportStore, pe.Export, "the PluginError names the export")
			}
			if tt.trigger == "loop" {
				assert.NotZero(t, gcs.Load(), "no garbage collection completed during the spin")
			}
			assert.Equal(t, string(before), string(sessionJSON(t, s)), "session changed")

			// The next call works, on a fresh instance.
			require.NoError(t, prov.Store(ctx, s, []abi.Message{user("again")}, nil), "store after")
			hist, err := prov.Provide(ctx, s, nil)
			require.NoError(t, err, "provide after")
			var texts []string
			for _, m := range hist {
				texts = append(texts, m.TextContent())
			}
			assert.Equal(t, "hello,again", strings.Join(texts, ","), "history")
		})
	}
}

// TestPluginExit: a plugin that ends its module with os.Exit (proc_exit,
// which SPEC section 1 forbids) instead of returning fails that call with
// ErrTrap, saying so, on the interpreter of a first use and on compiled
// code; the host goes on, the session is as it was, and the next call gets
// a fresh instance. An exit with status 0 once crashed the whole process:
// the host took it for a return and called the closed module for its
// output.
func TestPluginExit(t *testing.T) {
	ctx := context.Background()
	path := hostilePath(t, "exits")
	for _, engine := range []string{"interpreter", "compiled"} {
		t.Run(engine, func(t *testing.T) {
			cfg := host.Config{CacheDir: t.TempDir()}
			if engine == "compiled" {
				h, err := host.New(ctx, cfg)
				require.NoError(t, err)
				p, err := h.Load(ctx, host.File(path), host.LoadOptions{})
				require.NoError(t, err)
				require.NoError(t, p.Compiled(ctx))
				require.NoError(t, h.Close(ctx))
			}
			p, err := newHost(t, cfg).Load(ctx, host.File(path), host.LoadOptions{})
			require.NoError(t, err)
			prov := p.Provider("history")
			s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "exits"}
			require.NoError(t, prov.Store(ctx, s, []abi.Message{user("hello")}, nil))
			for _, trigger := range []string{"hostile:exit", "hostile:exit3"} {
				before := sessionJSON(t, s)
				err := prov.Store(ctx, s, []abi.Message{user(trigger)}, nil)
				require.ErrorIs(t, err, host.ErrTrap, trigger)
				if trigger == "hostile:exit" {
					assert.ErrorContains(t, err, "proc_exit(0) (os.Exit) instead of returning")
				} else {
					assert.ErrorContains(t, err, "exit_code(3)")
				}
				assert.Equal(t, string(before), string(sessionJSON(t, s)), "session changed")
				require.NoError(t, prov.Store(ctx, s, []abi.Message{user("again")}, nil), "the call after %s", trigger)
			}
			hist, err := prov.Provide(ctx, s, nil)
			require.NoError(t, err)
			var texts []string
			for _, m := range hist {
				texts = append(texts, m.TextContent())
			}
			assert.Equal(t, "hello,again,again", strings.Join(texts, ","))
		})
	}
	t.Run("an answer in the kernel, then exit(0)", func(t *testing.T) {
		// go-sdk takes proc_exit(0) for a return, so the answer stands;
		// the closed module must not go back to the pool, or the next
		// call would meet it.
		p := loadHostile(t, newHost(t, host.Config{}), "misbehave", host.LoadOptions{})
		prov := p.Provider("primary")
		s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "exitafter"}
		require.NoError(t, prov.Store(ctx, s, []abi.Message{user("hello")}, nil))
		require.NoError(t, prov.Store(ctx, s, []abi.Message{user("hostile:exitafter")}, nil))
		require.NoError(t, prov.Store(ctx, s, []abi.Message{user("again")}, nil), "the call after")
		hist, err := prov.Provide(ctx, s, nil)
		require.NoError(t, err)
		assert.Len(t, hist, 2)
	})
}

func TestHostileModules(t *testing.T) {
	h := newHost(t, host.Config{})
	tests := []struct {
		name     string
		plugin   string
		want     error
		mentions []string
	}{
		{"wrong ABI major", "wrongmajor", host.ErrVersionMismatch, []string{"wrongmajor", "v2", "v" + abi.Version, "upgrade the host"}},
		{"missing required export", "noexport", host.ErrMissingExport, []string{"noexport", "store"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Load(context.Background(), host.File(hostilePath(t, tt.plugin)), host.LoadOptions{})
			require.ErrorIs(t, err, tt.want)
			for _, m := range tt.mentions {
				assert.ErrorContains(t, err, m)
			}
		})
	}
}

func TestLoadRefusals(t *testing.T) {
	h := newHost(t, host.Config{})
	path := hostilePath(t, "misbehave")
	wasm, err := os.ReadFile(path)
	require.NoError(t, err)
	const zeros = "0000000000000000000000000000000000000000000000000000000000000000"
	tests := []struct {
		name     string
		src      host.PluginSource
		opts     host.LoadOptions
		want     error
		mentions string
	}{
		{"checksum mismatch", host.File(path), host.LoadOptions{SHA256: zeros}, host.ErrChecksumMismatch, "expected " + zeros + ", got "},
		{"config violates schema", host.Bytes("m", wasm), host.LoadOptions{Config: json.RawMessage(`{"max": -1}`)}, host.ErrInvalidConfig, "/max"},
		{"config not JSON", host.Bytes("m", wasm), host.LoadOptions{Config: json.RawMessage(`{"max": `)}, host.ErrInvalidConfig, "JSON"},
		{"config unknown field", host.Bytes("m", wasm), host.LoadOptions{Config: json.RawMessage(`{"maxx": 1}`)}, host.ErrInvalidConfig, "maxx"},
		{"not wasm", host.Bytes("junk", []byte("junk")), host.LoadOptions{}, host.ErrInvalidPlugin, "junk"},
		// A type section announcing four billion types in 5 bytes: the
		// runtime would ask for hundreds of gigabytes, and the process
		// would die of it.
		{"counts past its bytes", host.Bytes("huge", append([]byte("\x00asm\x01\x00\x00\x00\x01\x05"), 0xff, 0xff, 0xff, 0xff, 0x0f)),
			host.LoadOptions{}, host.ErrInvalidPlugin, "section 1: declares more than its bytes hold: a count or size of 4294967295"},
		{"memory below a Go guest's minimum", host.File(path), host.LoadOptions{Limits: host.Limits{MemoryPages: 8}}, host.ErrInvalidConfig, "MemoryPages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Load(context.Background(), tt.src, tt.opts)
			require.ErrorIs(t, err, tt.want)
			assert.ErrorContains(t, err, tt.mentions)
		})
	}
	t.Run("pinned", func(t *testing.T) {
		p, err := h.Load(context.Background(), host.Bytes("m", wasm), host.LoadOptions{})
		require.NoError(t, err)
		_, err = h.Load(context.Background(), host.File(path), host.LoadOptions{SHA256: strings.ToUpper(p.SHA256())})
		require.NoError(t, err, "load with the right pin")
	})
}

// TestMalformedSessions: a session whose slot does not fit the plugin is
// refused with an error that says what is wrong and where, and is left
// unchanged.
func TestMalformedSessions(t *testing.T) {
	h := newHost(t, host.Config{})
	p := loadHostile(t, h, "misbehave", host.LoadOptions{})
	tests := []struct {
		name     string
		slot     session.ProviderState
		want     error
		mentions string
	}{
		{"state violates schema", session.ProviderState{Provider: "misbehave", StateVersion: 1, Data: json.RawMessage(`{"messages": {}}`)}, host.ErrInvalidState, "/messages"},
		{"state not JSON", session.ProviderState{Provider: "misbehave", StateVersion: 1, Data: json.RawMessage(`{"messages": [`)}, host.ErrInvalidState, "JSON"},
		{"slot of another plugin", session.ProviderState{Provider: "other", StateVersion: 1, Data: json.RawMessage(`{"messages": []}`)}, host.ErrInvalidSession, "other"},
		{"newer state version", session.ProviderState{Provider: "misbehave", StateVersion: 7, Data: json.RawMessage(`{"messages": []}`)}, host.ErrStateVersion, "newer"},
		{"older state version, no migrate_state", session.ProviderState{Provider: "misbehave", StateVersion: 0, Data: json.RawMessage(`{"messages": []}`)}, host.ErrStateVersion, "migrate_state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &session.Session{SessionID: "s", State: map[string]session.ProviderState{"k": tt.slot}}
			before := s.Clone()
			_, err := p.Provider("k").Provide(context.Background(), s, nil)
			require.ErrorIs(t, err, tt.want)
			if tt.want == host.ErrStateVersion {
				require.ErrorIs(t, err, host.ErrInvalidState, "a state version comes with ErrInvalidState")
			} else {
				assert.NotErrorIs(t, err, host.ErrStateVersion)
			}
			assert.ErrorContains(t, err, tt.mentions)
			assert.Equal(t, before, s, "session changed")
		})
	}
}

// TestPatchBombBoundedByDeadline: a state_patch whose operations each move
// a large state (an insert at the front of an array, after a 1 MiB
// string) costs the host O(operations x state) after the plugin returned;
// the call's deadline bounds that work too: the call fails with
// ErrTimeout soon after it, the session is as it was, and the next call
// works.
func TestPatchBombBoundedByDeadline(t *testing.T) {
	ctx := context.Background()
	h := newHost(t, host.Config{})
	handler := sdk.Handler(provider.Provider{})
	var ops strings.Builder
	ops.WriteString(`{"state_patch":[{"op":"add","path":"/pad","value":"` + strings.Repeat("x", 1<<20) + `"}`)
	for range 20_000 {
		ops.WriteString(`,{"op":"add","path":"/messages/0","value":{"role":"user","contents":[{"type":"text","text":"x"}]}}`)
	}
	ops.WriteString(`]}`)
	bomb := []byte(ops.String())
	p, err := h.LoadNative(ctx, "bomb", func(ctx context.Context, export string, in []byte) ([]byte, error) {
		if export == abi.ExportDescribe {
			out, err := handler(ctx, export, in)
			require.NoError(t, err)
			var info abi.PluginInfo
			require.NoError(t, json.Unmarshal(out, &info))
			info.StateSchema = json.RawMessage(`{"type":"object","properties":{"messages":{"type":"array"}}}`)
			return json.Marshal(info)
		}
		if export == abi.ExportStore && strings.Contains(string(in), "hostile:patch") {
			return bomb, nil
		}
		return handler(ctx, export, in)
	}, host.LoadOptions{Limits: host.Limits{CallTimeout: 300 * time.Millisecond}})
	require.NoError(t, err)
	prov := p.Provider("history")
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "bomb"}
	require.NoError(t, prov.Store(ctx, s, []abi.Message{user("hello")}, nil))
	before := sessionJSON(t, s)
	start := time.Now()
	err = prov.Store(ctx, s, []abi.Message{user("hostile:patch")}, nil)
	took := time.Since(start)
	require.ErrorIs(t, err, host.ErrTimeout)
	assert.ErrorContains(t, err, "state_patch of 20001 operations")
	assert.Less(t, took, 2*time.Second, "the patch ran on past the deadline")
	t.Logf("failed after %s", took)
	assert.Equal(t, string(before), string(sessionJSON(t, s)), "session changed")
	require.NoError(t, prov.Store(ctx, s, []abi.Message{user("again")}, nil))
	hist, err := prov.Provide(ctx, s, nil)
	require.NoError(t, err)
	assert.Len(t, hist, 2)
}

// loadDeclaring loads the native sample provider declaring stateSchema
// and initial, whose store answers a message "hostile:deep" with the
// state {"messages":[],"deep":deep}.
func loadDeclaring(t *testing.T, name, stateSchema, initial, deep string, timeout time.Duration) (*host.Plugin, error) {
	handler := sdk.Handler(provider.Provider{})
	return newHost(t, host.Config{}).LoadNative(context.Background(), name, func(ctx context.Context, export string, in []byte) ([]byte, error) {
		if export == abi.ExportDescribe {
			out, err := handler(ctx, export, in)
			require.NoError(t, err)
			var info abi.PluginInfo
			require.NoError(t, json.Unmarshal(out, &info))
			info.StateSchema, info.InitialState = json.RawMessage(stateSchema), json.RawMessage(initial)
			return json.Marshal(info)
		}
		if export == abi.ExportStore && strings.Contains(string(in), "hostile:deep") {
			return []byte(`{"state":{"messages":[],"deep":` + deep + `}}`), nil
		}
		return handler(ctx, export, in)
	}, host.LoadOptions{Limits: host.Limits{CallTimeout: timeout}})
}

// TestStateSchemaRecursionBounded: a state_schema that recurses along two
// paths at each level compiles (its cost counts a recursion once), and
// validating a deep state with it would take 2^depth steps. Validation is
// counted: an initial_state refuses the plugin, a returned state is an
// invalid output, and a call's deadline stops the validation with
// ErrTimeout; the session is as it was, and the next call works.
func TestStateSchemaRecursionBounded(t *testing.T) {
	ctx := context.Background()
	deep := strings.Repeat(`{"a":`, 40) + "{}" + strings.Repeat("}", 40)
	const doubling = `{"type":"object","properties":{"messages":{"type":"array"},"deep":{"$ref":"#/$defs/n"}},
		"$defs":{"n":{"type":"object","allOf":[{"properties":{"a":{"$ref":"#/$defs/n"}}},{"properties":{"a":{"$ref":"#/$defs/n"}}}]}}}`
	load := func(t *testing.T, initial string, timeout time.Duration) (*host.Plugin, error) {
		return loadDeclaring(t, "doubling", doubling, initial, deep, timeout)
	}
	t.Run("initial_state", func(t *testing.T) {
		_, err := load(t, `{"messages":[],"deep":`+deep+`}`, 0)
		require.ErrorIs(t, err, host.ErrInvalidPlugin)
		assert.ErrorContains(t, err, "initial_state")
		assert.ErrorContains(t, err, "validation stopped after")
	})
	t.Run("initial_state past the call timeout", func(t *testing.T) {
		// The steps allow 0.3 s or more; the deadline stops it first.
		_, err := load(t, `{"messages":[],"deep":`+deep+`}`, 50*time.Millisecond)
		require.ErrorIs(t, err, host.ErrInvalidPlugin)
		assert.ErrorContains(t, err, "validating initial_state with state_schema took longer than the call timeout (50ms)")
	})
	for _, tt := range []struct {
		name    string
		timeout time.Duration
		want    error
		says    string
	}{
		{"counted", 0, host.ErrInvalidOutput, "along more paths than it has"},
		{"deadline", 50 * time.Millisecond, host.ErrTimeout, "while the host validated the plugin's state"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := load(t, `{"messages":[]}`, tt.timeout)
			require.NoError(t, err)
			prov := p.Provider("history")
			s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "doubling"}
			require.NoError(t, prov.Store(ctx, s, []abi.Message{user("hello")}, nil))
			before := sessionJSON(t, s)
			err = prov.Store(ctx, s, []abi.Message{user("hostile:deep")}, nil)
			require.ErrorIs(t, err, tt.want)
			assert.ErrorContains(t, err, tt.says)
			assert.Equal(t, string(before), string(sessionJSON(t, s)), "session changed")
			require.NoError(t, prov.Store(ctx, s, []abi.Message{user("again")}, nil))
			hist, err := prov.Provide(ctx, s, nil)
			require.NoError(t, err)
			assert.Len(t, hist, 2)
		})
	}
}

// TestMessageValidationInTheDeadline: a message a plugin returns by
// value is checked against the message schema within the call's
// deadline. One of 300,000 wrong parts (7.5 MB, within the output limit)
// took the validator about 15 s after the call had returned.
func TestMessageValidationInTheDeadline(t *testing.T) {
	ctx := context.Background()
	handler := sdk.Handler(provider.Provider{})
	msg := `{"role":"user","contents":[` + strings.Repeat(`{"type":"text","text":1},`, 300_000) + `{"type":"text","text":1}]}`
	p, err := newHost(t, host.Config{}).LoadNative(ctx, "wide", func(ctx context.Context, export string, in []byte) ([]byte, error) {
		if export == abi.ExportProvide {
			return []byte(`{"messages":[` + msg + `]}`), nil
		}
		return handler(ctx, export, in)
	}, host.LoadOptions{Limits: host.Limits{CallTimeout: 200 * time.Millisecond}})
	require.NoError(t, err)
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "wide"}
	_, err = p.Provider("history").Provide(ctx, s, nil)
	require.ErrorIs(t, err, host.ErrTimeout)
	assert.ErrorContains(t, err, "the deadline passed while the host validated the plugin's messages[0] of 7500053 bytes")
}

// TestStateDeepFailureBounded: a failure n subschemas deep costs the
// schema library n² bytes, and a state failing at each of n levels n³
// (1,500 levels: 20 GB in 11 s). The host follows a plugin's schema at
// most 256 subschemas deep: an initial_state that deep refuses the
// plugin, a returned state is an invalid output, and the session stays
// as it was.
func TestStateDeepFailureBounded(t *testing.T) {
	ctx := context.Background()
	// Nested past what a guest's JSON decoder reads: the host's own
	// decoder still takes it.
	deep := strings.Repeat(`{"a":`, 1500) + "{}" + strings.Repeat("}", 1500)
	const recursive = `{"type":"object","properties":{"messages":{"type":"array"},"deep":{"$ref":"#/$defs/n"}},
		"$defs":{"n":{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"required":["a"]}}}`
	load := func(t *testing.T, initial string) (*host.Plugin, error) {
		return loadDeclaring(t, "recursive", recursive, initial, deep, 0)
	}
	_, err := load(t, `{"messages":[],"deep":`+deep+`}`)
	require.ErrorIs(t, err, host.ErrInvalidPlugin)
	assert.ErrorContains(t, err, "initial_state")
	assert.ErrorContains(t, err, "validation stopped 256 subschemas deep")

	p, err := load(t, `{"messages":[]}`)
	require.NoError(t, err)
	prov := p.Provider("history")
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "deep"}
	require.NoError(t, prov.Store(ctx, s, []abi.Message{user("hello")}, nil))
	before := sessionJSON(t, s)
	err = prov.Store(ctx, s, []abi.Message{user("hostile:deep")}, nil)
	require.ErrorIs(t, err, host.ErrInvalidOutput)
	assert.ErrorContains(t, err, "validation stopped 256 subschemas deep")
	assert.Equal(t, string(before), string(sessionJSON(t, s)), "session changed")
}
