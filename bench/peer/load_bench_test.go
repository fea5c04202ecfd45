package peer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// The environment of a load child: the test binary re-executed to load one
// plugin in a fresh process (see TestMain).
const (
	childEnv      = "WASMHIST_PEER_CHILD"       // the mode, one of loadModes
	childWasm     = "WASMHIST_PEER_CHILD_WASM"  // the in-memory plugin's .wasm
	childBin      = "WASMHIST_PEER_CHILD_BIN"   // the go-plugin plugin binary
	childCacheDir = "WASMHIST_PEER_CHILD_CACHE" // the compilation cache
)

// loadModes are the variants of BenchmarkPeerLoadFreshProcess. baseline
// creates a host and loads nothing: the resident set of a host process
// before any plugin.
var loadModes = []string{"wasm-warm", "wasm-cold", "native", "goplugin", "baseline"}

// loadChild runs in a fresh process: from host.New to the answer of a first
// provide on a new session, then the resident sets of this process and of
// the plugin process, if any.
func loadChild(mode string) int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, mode+":", err); return 1 }
	start := time.Now()
	h, err := host.New(ctx, host.Config{CacheDir: os.Getenv(childCacheDir)})
	if err != nil {
		return fail(err)
	}
	var p *host.Plugin
	pluginPid := 0
	switch mode {
	case "wasm-warm", "wasm-cold":
		p, err = h.Load(ctx, host.File(os.Getenv(childWasm)), host.LoadOptions{})
	case "native":
		p, err = loadNative(ctx, h)
	case "goplugin":
		var c *Client
		p, c, err = loadGoPlugin(ctx, h, os.Getenv(childBin))
		if err == nil {
			defer c.Kill()
			pluginPid = c.Pid()
		}
	case "baseline":
	default:
		err = fmt.Errorf("unknown mode")
	}
	if err != nil {
		return fail(err)
	}
	if p != nil {
		s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "load"}
		if _, err := p.Provider("history").Provide(ctx, s, []abi.Message{benchMessage(abi.RoleUser, 0)}); err != nil {
			return fail(err)
		}
	}
	elapsed := time.Since(start)
	hostRSS, err := vmRSS(os.Getpid())
	if err != nil {
		return fail(err)
	}
	var pluginRSS int64
	if pluginPid != 0 {
		if pluginRSS, err = vmRSS(pluginPid); err != nil {
			return fail(err)
		}
	}
	fmt.Printf("ns=%d host_rss=%d plugin_rss=%d\n", elapsed.Nanoseconds(), hostRSS, pluginRSS)
	return 0
}

type childResult struct {
	elapsed            time.Duration
	hostRSS, pluginRSS int64
}

// runChild starts the test binary as a load child in mode.
func runChild(b *testing.B, mode, wasm, bin, cacheDir string) childResult {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childWasm+"="+wasm, childBin+"="+bin, childCacheDir+"="+cacheDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(b, err, "load child: %s", stderr.String())
	var r childResult
	for _, f := range strings.Fields(string(out)) {
		k, v, _ := strings.Cut(f, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(b, err, "load child printed %q", out)
		switch k {
		case "ns":
			r.elapsed = time.Duration(n)
		case "host_rss":
			r.hostRSS = n
		case "plugin_rss":
			r.pluginRSS = n
		}
	}
	require.NotZero(b, r.hostRSS, "load child printed %q", out)
	return r
}

// BenchmarkPeerLoadFreshProcess measures, in fresh processes, the time from
// host.New to the answer of a first call (a provide on a new session) and
// the resident memory then, for:
//
//   - wasm-warm: the in-memory plugin (.wasm) with the on-disk compilation
//     cache already filled;
//   - wasm-cold: the same with an empty compilation cache (it compiles);
//   - native: the provider code loaded with host.LoadNative;
//   - goplugin: starting the go-plugin process (exec, Go runtime, go-plugin
//     handshake, gRPC connection), loading it, and the first call over gRPC;
//   - baseline: host.New alone, for the resident set of the host process
//     before any plugin.
//
// Every iteration starts one child of each, in an order that rotates. The
// start of the child process itself is not counted (it is the host
// program's own start-up); the go-plugin process's start is, since that is
// the plugin's. Metrics: ms/load, the host process's VmRSS and, for
// goplugin, the plugin process's VmRSS (MiB), and the ratios of this run.
func BenchmarkPeerLoadFreshProcess(b *testing.B) {
	wasm, bin := wasmPlugin(b), pluginBinary(b)
	warm := filepath.Join(tempDir, "cache-warm")
	runChild(b, "wasm-warm", wasm, bin, warm) // fills the compilation cache
	runChild(b, "goplugin", wasm, bin, warm)  // the binary into the page cache

	var elapsed [5]time.Duration
	var hostRSS, pluginRSS [5]int64
	i := 0
	for b.Loop() {
		for k := range loadModes {
			m := (i + k) % len(loadModes)
			cache := warm
			if loadModes[m] == "wasm-cold" {
				cache = filepath.Join(tempDir, fmt.Sprintf("cache-cold-%d", i))
			}
			r := runChild(b, loadModes[m], wasm, bin, cache)
			if loadModes[m] == "wasm-cold" {
				os.RemoveAll(cache)
			}
			elapsed[m] += r.elapsed
			hostRSS[m] += r.hostRSS
			pluginRSS[m] += r.pluginRSS
		}
		i++
	}
	const mib = 1 << 20
	for m, mode := range loadModes {
		if mode != "baseline" {
			b.ReportMetric(float64(elapsed[m].Microseconds())/1e3/float64(b.N), mode+"-ms/load")
		}
		b.ReportMetric(float64(hostRSS[m])/mib/float64(b.N), mode+"-host-RSS-MiB")
	}
	b.ReportMetric(float64(pluginRSS[3])/mib/float64(b.N), "goplugin-plugin-RSS-MiB")
	b.ReportMetric(float64(elapsed[0])/float64(elapsed[3]), "wasm-warm/goplugin-load")
	b.ReportMetric(float64(elapsed[0])/float64(elapsed[2]), "wasm-warm/native-load")
	b.ReportMetric(loadAvg(), "loadavg")
}
