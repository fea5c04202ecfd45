package wasmrt

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
)

// BenchmarkPreemption compares the ways a guest can be made stoppable, on
// a store of two messages of about 500 bytes into the in-memory plugin,
// the variants alternated within each iteration and timed apart:
//
//   - rewritten: the module rewritten by package instrument (the host's
//     way);
//   - wazero: the module as built, with wazero's WithCloseOnContextDone;
//   - none: the module as built, with no preemption at all: the floor,
//     which the host never runs, since such a guest cannot be stopped.
func BenchmarkPreemption(b *testing.B) {
	ctx := context.Background()
	wasm := pluginWasm(b)
	rewritten, err := instrument.Module(wasm)
	require.NoError(b, err)
	cache := userCache(b)
	variants := []struct {
		name        string
		wasm        []byte
		closeOnDone bool
	}{{"rewritten", rewritten, false}, {"wazero", wasm, true}, {"none", wasm, false}}
	input := storeInput()
	ins := make([]*Instance, len(variants))
	for i, v := range variants {
		c, err := compileIn(ctx, cache, nil, v.wasm, testPages, v.closeOnDone, false)
		require.NoError(b, err)
		c.interruptible = !v.closeOnDone && v.name == "rewritten"
		b.Cleanup(func() { c.Close(ctx) })
		ins[i], err = newModule(nil, moduleKey{}, c).NewInstance(ctx, testPages)
		require.NoError(b, err)
		// Past the first calls' heap growth (see RATIONALE.md).
		for range 2000 {
			_, err := ins[i].Call(ctx, "store", input)
			require.NoError(b, err)
		}
	}
	var took [3]time.Duration
	n := 0
	for b.Loop() {
		for k := range variants {
			v := (n + k) % len(variants)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			t0 := time.Now()
			_, err := ins[v].Call(cctx, "store", input)
			took[v] += time.Since(t0)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
	for i, v := range variants {
		b.ReportMetric(float64(took[i].Nanoseconds())/float64(n), v.name+"-ns/store")
	}
	b.ReportMetric(float64(took[0])/float64(took[2]), "rewritten/none")
	b.ReportMetric(float64(took[1])/float64(took[2]), "wazero/none")
}
