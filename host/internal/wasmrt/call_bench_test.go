package wasmrt

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"
)

// BenchmarkCall measures the fixed cost of a call into an instance of the
// in-memory plugin: the ABI marker export (which does nothing), describe,
// and a store of one short message, each under a deadline as the host
// calls them (preemptible).
func BenchmarkCall(b *testing.B) {
	ctx := context.Background()
	wasm := pluginWasm(b)
	m, err := newEngine(b, userCache(b)).Compile(ctx, sha256.Sum256(wasm), wasm, 512)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release(ctx)
	store := []byte(`{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user","contents":[{"type":"text","text":"hello"}]}],"response_messages":[]}`)
	for _, c := range []struct {
		export string
		input  []byte
	}{{"wasmhist_abi_v1", nil}, {"describe", nil}, {"store", store}} {
		b.Run(c.export, func(b *testing.B) {
			in, err := m.NewInstance(ctx, 512)
			if err != nil {
				b.Fatal(err)
			}
			defer in.Close(ctx)
			b.ReportAllocs()
			for b.Loop() {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := in.Call(cctx, c.export, c.input)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
