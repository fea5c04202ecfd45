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

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// BenchmarkBuildRSS measures the memory a Host spends per loaded plugin
// build: after one build is loaded (what any host pays once), it loads
// more distinct builds of the same sample plugin (its bytes with a custom
// section appended, so each has its own sha256 and is compiled, cached and
// instantiated as a build of its own), and reports the growth of the
// process's resident set and of the Go heap in use per build (after
// debug.FreeOSMemory). Run it once first to fill the compilation cache:
// a build the cache does not hold is compiled in a process of its own.
func BenchmarkBuildRSS(b *testing.B) {
	const builds = 8
	plugins := []struct {
		name, pkg string
		grants    func(dir string) []host.Grant
	}{
		{"inmemory", "github.com/wasmhist/wasmhist/plugins/inmemory", func(string) []host.Grant { return nil }},
		{"sqlite", "github.com/wasmhist/wasmhist/plugins/sqlite", func(dir string) []host.Grant {
			return []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "history.db")})}
		}},
	}
	for _, pl := range plugins {
		b.Run(pl.name, func(b *testing.B) {
			wasm, err := os.ReadFile(sdktest.BuildPlugin(b, pl.pkg))
			require.NoError(b, err)
			dir := b.TempDir()
			for b.Loop() {
				ctx := context.Background()
				h, err := host.New(ctx, host.Config{})
				require.NoError(b, err)
				load := func(i int) {
					_, err := h.Load(ctx, host.Bytes(fmt.Sprintf("%s-%d", pl.name, i), withBuildSection(wasm, i)), host.LoadOptions{Grants: pl.grants(dir)})
					require.NoError(b, err)
				}
				load(0)
				rss0, heap0 := memoryInUse(b)
				for i := 1; i <= builds; i++ {
					load(i)
				}
				rss1, heap1 := memoryInUse(b)
				b.ReportMetric(float64(rss1-rss0)/builds/(1<<20), "MiB-RSS/build")
				b.ReportMetric(float64(heap1-heap0)/builds/(1<<20), "MiB-heap/build")
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

// memoryInUse returns the process's resident set and the Go heap in use,
// after the collector has returned what it can to the system.
func memoryInUse(b testing.TB) (rss, heap int64) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f, err := os.Open("/proc/self/status")
	require.NoError(b, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(b, err)
			return kb << 10, int64(ms.HeapInuse)
		}
	}
	b.Fatal("VmRSS not found in /proc/self/status")
	return 0, 0
}
