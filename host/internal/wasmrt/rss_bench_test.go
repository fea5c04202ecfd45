package wasmrt

import (
	"bufio"
	"context"
	"crypto/sha256"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkInstanceRSS measures what one pooled instance of the in-memory
// plugin costs in resident memory: it creates N instances of one compiled
// module, runs describe and a store on each (so the guest runtime is
// initialised and has done real work), and reports the growth of the
// process's resident set divided by N (pages the instances touched), and
// their linear memory size (what they reserved; untouched pages are not
// resident). Compiled code is shared by all instances and is not counted.
func BenchmarkInstanceRSS(b *testing.B) {
	const n = 32
	ctx := context.Background()
	wasm := pluginWasm(b)
	m, err := newEngine(b, userCache(b)).Compile(ctx, sha256.Sum256(wasm), wasm, 512)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release(ctx)
	store := []byte(`{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user","contents":[{"type":"text","text":"hello"}]}],"response_messages":[]}`)
	for b.Loop() {
		debug.FreeOSMemory()
		before := residentBytes(b)
		ins := make([]*Instance, 0, n)
		for range n {
			in, err := m.NewInstance(ctx, 512)
			if err != nil {
				b.Fatal(err)
			}
			for _, call := range []struct {
				export string
				input  []byte
			}{{"describe", nil}, {"store", store}} {
				if _, err := in.Call(ctx, call.export, call.input); err != nil {
					b.Fatalf("%s: %v", call.export, err)
				}
			}
			ins = append(ins, in)
		}
		debug.FreeOSMemory()
		after := residentBytes(b)
		var linear uint64
		for _, in := range ins {
			linear += in.MemoryBytes()
		}
		b.ReportMetric(float64(after-before)/n/(1<<20), "MiB-RSS/instance")
		b.ReportMetric(float64(linear)/n/(1<<20), "MiB-linear/instance")
		for _, in := range ins {
			in.Close(ctx)
		}
	}
}

// residentBytes reads the process's resident set size from /proc.
func residentBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatalf("resident set size needs /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("VmRSS not found in /proc/self/status")
	return 0
}
