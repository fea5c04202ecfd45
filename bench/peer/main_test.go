package peer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// tempDir holds what the test binary builds (the go-plugin plugin binary)
// and the compilation caches of the load children; TestMain removes it.
var tempDir string

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(loadChild(mode))
	}
	dir, err := os.MkdirTemp("", "wasmhist-peer-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tempDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce  sync.Once
	pluginPath string
	buildErr   error
)

// pluginBinary builds cmd/peerplugin into the temporary directory, once
// per test process.
func pluginBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		pluginPath = filepath.Join(tempDir, "peerplugin")
		cmd := exec.Command(sdktest.GoCommand(), "build", "-o", pluginPath, "./cmd/peerplugin")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build peerplugin: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return pluginPath
}

// wasmPlugin is the in-memory plugin as WebAssembly, built from the main
// module's source.
func wasmPlugin(tb testing.TB) string {
	tb.Helper()
	return sdktest.BuildPlugin(tb, "github.com/wasmhist/wasmhist/plugins/inmemory")
}

// loadGoPlugin starts the plugin process and loads it into h as a native
// plugin whose handler forwards over gRPC.
func loadGoPlugin(ctx context.Context, h *host.Host, bin string) (*host.Plugin, *Client, error) {
	c, err := Start(bin)
	if err != nil {
		return nil, nil, err
	}
	p, err := h.LoadNative(ctx, provider.Name, c.Handler(), host.LoadOptions{})
	if err != nil {
		c.Kill()
		return nil, nil, err
	}
	return p, c, nil
}

// loadNative loads the provider code into h with no boundary at all.
func loadNative(ctx context.Context, h *host.Host) (*host.Plugin, error) {
	return h.LoadNative(ctx, provider.Name, sdk.Handler(provider.Provider{}), host.LoadOptions{})
}

// TestGoPluginProvider checks that the go-plugin provider behaves as the
// in-memory plugin does through the host: what is stored is provided, and
// an error crosses the process boundary as the same *abi.Error.
func TestGoPluginProvider(t *testing.T) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{CacheDir: t.TempDir()})
	require.NoError(t, err)
	defer h.Close(ctx)
	p, c, err := loadGoPlugin(ctx, h, pluginBinary(t))
	require.NoError(t, err)
	defer c.Kill()
	require.Equal(t, provider.Name, p.Info().Name)

	prov := p.Provider("history")
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "t"}
	require.NoError(t, prov.Store(ctx, s, []abi.Message{benchMessage(abi.RoleUser, 0)}, []abi.Message{benchMessage(abi.RoleAssistant, 1)}))
	hist, err := prov.Provide(ctx, s, []abi.Message{benchMessage(abi.RoleUser, 2)})
	require.NoError(t, err)
	require.Len(t, hist, 2) // the stored turn; the request is not history yet

	_, err = c.Handler()(ctx, abi.ExportProvide, []byte("{not json"))
	var aerr *abi.Error
	require.ErrorAs(t, err, &aerr)
	require.Equal(t, abi.CodeInvalidArgument, aerr.Code)
}

// seedSession returns a session whose provider slot holds n messages, as
// plugins/inmemory's BenchmarkTurn seeds it.
func seedSession(tb testing.TB, prov *host.Provider, n int) *session.Session {
	tb.Helper()
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "bench"}
	batch := make([]abi.Message, 0, 100)
	for i := 0; i < n; i++ {
		role := abi.RoleUser
		if i%2 == 1 {
			role = abi.RoleAssistant
		}
		batch = append(batch, benchMessage(role, i))
		if len(batch) == cap(batch) || i == n-1 {
			require.NoError(tb, prov.Store(context.Background(), s, batch, nil))
			batch = batch[:0]
		}
	}
	return s.Clone()
}

// benchMessage is a message of about 500 bytes of JSON, as in
// plugins/inmemory's BenchmarkTurn.
func benchMessage(role abi.Role, i int) abi.Message {
	text := fmt.Sprintf("message %d: ", i) + strings.Repeat("lorem ipsum dolor sit amet ", 15)
	m := abi.NewMessage(role, text)
	m.MessageID = fmt.Sprintf("msg-%06d", i)
	m.CreatedAt = "2026-11-21T10:00:00Z"
	return m
}

// loadAvg is the one-minute load average, recorded with every run: on a
// shared machine it says how much the figures can be trusted.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}

// vmRSS returns the resident set of process pid in bytes, from /proc.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "1234 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
