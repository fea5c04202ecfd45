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

// BenchmarkInstanceRSS measures what one pooled instance of a plugin costs
// in resident memory: it creates N instances of one compiled module, runs
// calls on each (so the guest runtime is initialised and has done work:
// describe and a store for the in-memory plugin; describe alone for the
// sqlite plugin, whose store needs a database this package does not
// grant), and reports, divided by N, the growth of the process's resident
// set (pages the instances touched), of its anonymous part (the pages only
// one instance holds), of its proportional set size (each shared page
// divided among the instances that map it), and their linear memory size
// (what they reserved; untouched pages are not resident). The resident set
// counts a page of the build's initial memory (image.go) once per instance
// that maps it, though the instances share it. Compiled code is shared by
// all instances and is not counted.
//
// Besides the two sample Go plugins: the AssemblyScript sample and
// host/testdata/minimal, the least Go plugin (the Go runtime alone).
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
		{"asmemory", func(t testing.TB) []byte {
			wasm, err := os.ReadFile("../../../plugins/asmemory/asmemory.wasm")
			if err != nil {
				t.Fatalf("make plugins builds the AssemblyScript sample: %v", err)
			}
			return wasm
		}, nil, []call{{"describe", nil}, {"store", store}}},
		{"minimal", func(t testing.TB) []byte { return buildWasm(t, "../../testdata/minimal") }, nil, []call{{"describe", nil}, {"store", store}}},
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
				before := memoryInUse(b)
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
				after := memoryInUse(b)
				var linear uint64
				for _, in := range ins {
					linear += in.MemoryBytes()
				}
				b.ReportMetric(float64(after.rss-before.rss)/n/(1<<20), "MiB-RSS/instance")
				b.ReportMetric(float64(after.anon-before.anon)/n/(1<<20), "MiB-anon/instance")
				b.ReportMetric(float64(after.pss-before.pss)/n/(1<<20), "MiB-PSS/instance")
				b.ReportMetric(float64(linear)/n/(1<<20), "MiB-linear/instance")
				for _, in := range ins {
					in.Close(ctx)
				}
			}
		})
	}
}

// memory is what the process holds, from /proc/self/smaps_rollup (which
// counts pages exactly): its resident set, the anonymous part of it, and
// its proportional set size.
type memory struct{ rss, anon, pss int64 }

// memoryInUse returns the memory in use, after the collector has returned
// what it can to the system.
func memoryInUse(b *testing.B) memory {
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		b.Fatalf("resident set size needs /proc: %v", err)
	}
	defer f.Close()
	m := memory{rss: -1, anon: -1, pss: -1}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var to *int64
		switch name {
		case "Rss":
			to = &m.rss
		case "Anonymous":
			to = &m.anon
		case "Pss":
			to = &m.pss
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		*to = kb << 10
	}
	if m.rss < 0 || m.anon < 0 || m.pss < 0 {
		b.Fatal("Rss, Anonymous or Pss not found in /proc/self/smaps_rollup")
	}
	return m
}
