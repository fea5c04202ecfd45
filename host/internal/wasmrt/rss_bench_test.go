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

	"github.com/wasmhist/wasmhist/host/internal/capability"
)

// BenchmarkInstanceRSS measures what one pooled instance of each sample
// plugin costs in resident memory: it creates N instances of one compiled
// module, runs calls on each (so the guest runtime is initialised and has
// done work: describe and a store for the in-memory plugin; describe alone
// for the sqlite plugin, whose store needs a database this package does not
// grant), and reports the growth of the process's resident set divided by
// N (pages the instances touched), and their linear memory size (what they
// reserved; untouched pages are not resident). Compiled code is shared by
// all instances and is not counted.
func BenchmarkInstanceRSS(b *testing.B) {
	const n = 32
	store := []byte(`{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user","contents":[{"type":"text","text":"hello"}]}],"response_messages":[]}`)
	type call struct {
		export string
		input  []byte
	}
	plugins := []struct {
		name  string
		wasm  func(testing.TB) []byte
		funcs []capability.Func
		calls []call
	}{
		{"inmemory", pluginWasm, []capability.Func{echoFunc}, []call{{"describe", nil}, {"store", store}}},
		// The sql import is linked to a stub: describe does not use it.
		{"sqlite", func(t testing.TB) []byte { return buildWasm(t, "github.com/wasmhist/wasmhist/plugins/sqlite") },
			[]capability.Func{{Capability: "sql", Name: "sql", Call: echoCall}}, []call{{"describe", nil}}},
	}
	for _, pl := range plugins {
		b.Run(pl.name, func(b *testing.B) {
			ctx := context.Background()
			wasm := pl.wasm(b)
			e := NewEngine(userCache(b), pl.funcs)
			defer e.Close(ctx)
			m, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, 512)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Release(ctx)
			for b.Loop() {
				debug.FreeOSMemory()
				before := residentBytes(b)
				ins := make([]*Instance, 0, n)
				for range n {
					in, err := m.NewInstance(ctx, 512)
					if err != nil {
						b.Fatal(err)
					}
					for _, c := range pl.calls {
						if _, err := in.Call(ctx, c.export, c.input); err != nil {
							b.Fatalf("%s: %v", c.export, err)
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
		})
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
