//go:build linux

package sqlgrant_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// firstUseChildEnv makes the test binary a child that loads one plugin
// with an empty compilation cache (see firstUseChild); its value is the
// plugin's path.
const firstUseChildEnv = "WASMHIST_BENCH_FIRST_USE"

func init() {
	if path := os.Getenv(firstUseChildEnv); path != "" {
		os.Exit(firstUseChild(path))
	}
}

// cpuSoFar is the CPU time (user and system) of this process and of its
// children waited for.
func cpuSoFar() (self, children time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return self, time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// firstUseChild, in a fresh process, creates a host with an empty
// compilation cache and loads the plugin at path (granted an SQLite file,
// which only the sqlite plugin asks for), which answers its first call,
// describe. It prints the process's CPU time from its start to that
// answer, then closes the host, which waits for the compilation the first
// use started, and prints the CPU time of the process and of its compile
// process by then.
func firstUseChild(path string) int {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "wasmhist-first-use-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	h, err := host.New(ctx, host.Config{CacheDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fail(err)
	}
	grant := sqlgrant.New(sqlgrant.Config{Path: filepath.Join(dir, "history.db")})
	opts := host.LoadOptions{Grants: []host.Grant{grant}}
	if !strings.Contains(filepath.Base(path), "sqlite") {
		opts.Grants = nil
	}
	if _, err := h.Load(ctx, host.File(path), opts); err != nil {
		return fail(err)
	}
	first, children := cpuSoFar()
	if err := h.Close(ctx); err != nil {
		return fail(err)
	}
	self, compile := cpuSoFar()
	fmt.Printf("%d %d %d %d\n", first, children, self-first, compile-children)
	return 0
}

// BenchmarkFirstUse measures a plugin's first use: each iteration starts
// the test binary anew with an empty compilation cache, which loads the
// plugin (its first call, describe, answered) and closes the host. It
// reports the CPU time from the process's start to that answer
// (cpu-ms/first-call, with any compile process's, of which there is none
// yet), and what the compilation the first use starts costs afterwards:
// in the host's process (cpu-ms/switch: reading the compiled code back
// from the cache) and in the compile process (cpu-ms/compile-process).
func BenchmarkFirstUse(b *testing.B) {
	for _, pkg := range []string{"inmemory", "sqlite"} {
		b.Run(pkg, func(b *testing.B) {
			wasm := sdktest.BuildPlugin(b, "github.com/wasmhist/wasmhist/plugins/"+pkg)
			var sums [4]time.Duration
			for b.Loop() {
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(), firstUseChildEnv+"="+wasm)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				require.NoError(b, err, "first-use child: %s", stderr.String())
				f := strings.Fields(string(out))
				require.Len(b, f, 4, "first-use child printed %q", out)
				for i := range f {
					ns, err := strconv.ParseInt(f[i], 10, 64)
					require.NoError(b, err)
					sums[i] += time.Duration(ns)
				}
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
			b.ReportMetric(ms(sums[0]+sums[1]), "cpu-ms/first-call")
			b.ReportMetric(ms(sums[2]), "cpu-ms/switch")
			b.ReportMetric(ms(sums[3]), "cpu-ms/compile-process")
			b.ReportMetric(0, "ns/op") // the wall time includes the compilation
		})
	}
}
