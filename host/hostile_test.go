package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmhist/wasmhist/host/session"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func loadHostile(t testing.TB, h *host.Host, name string, opts host.LoadOptions) *host.Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), host.File(hostilePath(t, name)), opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func user(text string) abi.Message { return abi.NewMessage(abi.RoleUser, text) }

func sessionJSON(t *testing.T, s *session.Session) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
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
			if err := prov.Store(ctx, s, []abi.Message{user("hello")}, nil); err != nil {
				t.Fatalf("store before: %v", err)
			}
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
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			for _, nw := range tt.notWant {
				if errors.Is(err, nw) {
					t.Errorf("%v also matches %v", err, nw)
				}
			}
			var pe *host.PluginError
			if !errors.As(err, &pe) || pe.Plugin != "misbehave" || pe.Export != abi.ExportStore {
				t.Errorf("error %v is not a PluginError naming misbehave/store", err)
			}
			if tt.trigger == "loop" && gcs.Load() == 0 {
				t.Error("no garbage collection completed during the spin")
			}
			if after := sessionJSON(t, s); !bytes.Equal(before, after) {
				t.Errorf("session changed:\nbefore %s\nafter  %s", before, after)
			}

			// The next call works, on a fresh instance.
			if err := prov.Store(ctx, s, []abi.Message{user("again")}, nil); err != nil {
				t.Fatalf("store after: %v", err)
			}
			hist, err := prov.Provide(ctx, s, nil)
			if err != nil {
				t.Fatalf("provide after: %v", err)
			}
			var texts []string
			for _, m := range hist {
				texts = append(texts, m.TextContent())
			}
			if got := strings.Join(texts, ","); got != "hello,again" {
				t.Errorf("history %q, want hello,again", got)
			}
		})
	}
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
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestLoadRefusals(t *testing.T) {
	h := newHost(t, host.Config{})
	path := hostilePath(t, "misbehave")
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
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
		{"memory below a Go guest's minimum", host.File(path), host.LoadOptions{Limits: host.Limits{MemoryPages: 8}}, host.ErrInvalidConfig, "MemoryPages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Load(context.Background(), tt.src, tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("error %q does not mention %q", err, tt.mentions)
			}
		})
	}
	t.Run("pinned", func(t *testing.T) {
		p, err := h.Load(context.Background(), host.Bytes("m", wasm), host.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Load(context.Background(), host.File(path), host.LoadOptions{SHA256: strings.ToUpper(p.SHA256())}); err != nil {
			t.Fatalf("load with the right pin: %v", err)
		}
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
		{"newer state version", session.ProviderState{Provider: "misbehave", StateVersion: 7, Data: json.RawMessage(`{"messages": []}`)}, host.ErrInvalidState, "newer"},
		{"older state version, no migrate_state", session.ProviderState{Provider: "misbehave", StateVersion: 0, Data: json.RawMessage(`{"messages": []}`)}, host.ErrInvalidState, "migrate_state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &session.Session{SessionID: "s", State: map[string]session.ProviderState{"k": tt.slot}}
			before := s.Clone()
			_, err := p.Provider("k").Provide(context.Background(), s, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("error %q does not mention %q", err, tt.mentions)
			}
			if !reflect.DeepEqual(before, s) {
				t.Error("session changed")
			}
		})
	}
}
