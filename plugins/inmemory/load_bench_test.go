//go:build !wasip1

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// loadChildEnv makes the test binary a child that loads one plugin and
// reports how long that took (see TestMain).
const loadChildEnv = "WASMHIST_BENCH_LOAD_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(loadChildEnv); path != "" {
		os.Exit(loadChild(path))
	}
	os.Exit(m.Run())
}

// loadChild loads the plugin at path in this fresh process and prints the
// time from host.New to a loaded, described plugin with one instance.
func loadChild(path string) int {
	ctx := context.Background()
	start := time.Now()
	h, err := host.New(ctx, host.Config{})
	if err == nil {
		_, err = h.Load(ctx, host.File(path), host.LoadOptions{})
	}
	elapsed := time.Since(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("load_ns=%d\n", elapsed.Nanoseconds())
	return 0
}

// BenchmarkLoadFreshProcess measures a warm-cache load in a fresh process:
// each iteration starts the test binary anew, which creates a host and loads
// the in-memory plugin from disk with the on-disk compilation cache already
// filled. The figure is ms/load, measured inside the child (process start-up
// is not the host's cost).
func BenchmarkLoadFreshProcess(b *testing.B) {
	wasm := sdktest.BuildPlugin(b, "github.com/wasmhist/wasmhist/plugins/inmemory")
	loadInChild(b, wasm) // fills the on-disk compilation cache
	var total time.Duration
	for b.Loop() {
		total += loadInChild(b, wasm)
	}
	b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "ms/load")
	b.ReportMetric(0, "ns/op") // the wall time per op includes process start-up
}

// loadInChild starts the test binary as a load child and returns the load
// time it measured.
func loadInChild(b *testing.B, wasm string) time.Duration {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), loadChildEnv+"="+wasm)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(b, err, "load child: %s", stderr.String())
	line := strings.TrimSpace(string(out))
	ns, err := strconv.ParseInt(strings.TrimPrefix(line, "load_ns="), 10, 64)
	require.NoError(b, err, "load child printed %q", line)
	return time.Duration(ns)
}
