//go:build linux

package sqlgrant_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// BenchmarkBuildRSS measures the memory a Host spends per loaded plugin
// build: after one build is loaded (what any host pays once), it loads
// more distinct builds of the same plugin (its bytes with a custom
// section appended, so each has its own sha256 and is compiled, cached and
// instantiated as a build of its own), and reports the growth per build
// of the process's resident set, of its anonymous (private) part, and of
// the Go heap in use (after debug.FreeOSMemory). The resident set counts
// the pages of files the host maps (a build's machine code, its initial
// memory) once per mapping, as distinct builds would; anonymous memory is
// what only the process holds and the kernel cannot reclaim without swap.
// Then each build serves one turn (provide and store, on a session of its
// own), and the resident set's growth per build is reported again
// (MiB-RSS/build-turned): a build's code leaves the resident set once its
// guest runtime has started, and what a turn runs comes back.
//
// Besides the two sample Go plugins: the AssemblyScript sample (a 26 KB
// module), and host/testdata/minimal, the least Go plugin (the Go runtime
// alone): the floor of a Go build. Run it once first to fill the
// compilation cache: a build the cache does not hold is compiled in a
// process of its own.
func BenchmarkBuildRSS(b *testing.B) {
	const builds = 8
	noGrants := func(string) []host.Grant { return nil }
	plugins := []struct {
		name   string
		wasm   func(testing.TB) string
		grants func(dir string) []host.Grant
	}{
		{"inmemory", goPlugin("github.com/wasmhist/wasmhist/plugins/inmemory"), noGrants},
		{"sqlite", goPlugin("github.com/wasmhist/wasmhist/plugins/sqlite"), func(dir string) []host.Grant {
			return []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "history.db")})}
		}},
		{"asmemory", func(testing.TB) string { return "../../plugins/asmemory/asmemory.wasm" }, noGrants},
		{"minimal", goPlugin("../testdata/minimal"), noGrants},
	}
	for _, pl := range plugins {
		b.Run(pl.name, func(b *testing.B) {
			wasm, err := os.ReadFile(pl.wasm(b))
			require.NoError(b, err, "make plugins builds the AssemblyScript sample")
			dir := b.TempDir()
			for b.Loop() {
				ctx := context.Background()
				h, err := host.New(ctx, host.Config{})
				require.NoError(b, err)
				var loaded []*host.Plugin
				load := func(i int) {
					p, err := h.Load(ctx, host.Bytes(fmt.Sprintf("%s-%d", pl.name, i), withBuildSection(wasm, i)), host.LoadOptions{Grants: pl.grants(dir)})
					require.NoError(b, err)
					loaded = append(loaded, p)
				}
				turn := func(i int) {
					s := session.New()
					s.SessionID = fmt.Sprintf("rss-%d", i)
					prov := loaded[i].Provider("history")
					user := []abi.Message{abi.NewMessage(abi.RoleUser, "hello")}
					_, err := prov.Provide(ctx, s, user)
					require.NoError(b, err)
					require.NoError(b, prov.Store(ctx, s, user, []abi.Message{abi.NewMessage(abi.RoleAssistant, "hi")}))
				}
				load(0)
				turn(0)
				// Past the 2 s a build's code waits without a call before
				// it is given back (RATIONALE: "Why does an idle build give
				// its code back?"): build 0 is idle in every figure.
				time.Sleep(3 * time.Second)
				m0 := memoryInUse(b)
				for i := 1; i <= builds; i++ {
					load(i)
				}
				m1 := memoryInUse(b)
				for i := 1; i <= builds; i++ {
					turn(i)
				}
				m2 := memoryInUse(b)
				time.Sleep(3 * time.Second) // every build idle

				m3 := memoryInUse(b)
				b.ReportMetric(float64(m1.rss-m0.rss)/builds/(1<<20), "MiB-RSS/build")
				b.ReportMetric(float64(m1.anon-m0.anon)/builds/(1<<20), "MiB-anon/build")
				b.ReportMetric(float64(m1.heap-m0.heap)/builds/(1<<20), "MiB-heap/build")
				b.ReportMetric(float64(m2.rss-m0.rss)/builds/(1<<20), "MiB-RSS/build-turned")
				b.ReportMetric(float64(m3.rss-m0.rss)/builds/(1<<20), "MiB-RSS/build-idle")
				require.NoError(b, h.Close(ctx))
			}
		})
	}
}

// withBuildSection returns wasm with a custom section "wasmhist-bench"
// holding i appended: another build of the same module.
func withBuildSection(wasm []byte, i int) []byte {
	const name = "wasmhist-bench"
	payload := append([]byte{byte(len(name))}, name...)
	payload = binary.AppendUvarint(payload, uint64(i))
	out := append([]byte(nil), wasm...)
	out = append(out, 0)
	out = binary.AppendUvarint(out, uint64(len(payload)))
	return append(out, payload...)
}

// goPlugin builds the Go plugin at pkg (an import path or a directory).
func goPlugin(pkg string) func(testing.TB) string {
	return func(tb testing.TB) string { return sdktest.BuildPlugin(tb, pkg) }
}

// memory is what the process holds: its resident set and the anonymous
// part of it (from /proc/self/smaps_rollup, which counts pages exactly),
// and the Go heap in use.
type memory struct{ rss, anon, heap int64 }

// memoryInUse returns the memory in use, after the collector has returned
// what it can to the system.
func memoryInUse(b testing.TB) memory {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f, err := os.Open("/proc/self/smaps_rollup")
	require.NoError(b, err)
	defer f.Close()
	m := memory{rss: -1, anon: -1, heap: int64(ms.HeapInuse)}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "Rss" && name != "Anonymous") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
		require.NoError(b, err)
		if name == "Rss" {
			m.rss = kb << 10
		} else {
			m.anon = kb << 10
		}
	}
	require.False(b, m.rss < 0 || m.anon < 0, "Rss or Anonymous not found in /proc/self/smaps_rollup")
	return m
}
