package wasmrt

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
)

// BenchmarkStore runs stores of two 500-byte messages into one instance of
// the in-memory plugin, rewritten or as built. It is made for counting
// instructions, which a busy machine does not change (BENCHMARKS.md,
// "Preemption"): run it under valgrind with -test.benchtime=2000x and 1x,
// and divide the difference.
// storeInput is the input of a store of two messages of about 500 bytes.
func storeInput() []byte {
	text := strings.Repeat("lorem ipsum dolor sit amet ", 18)
	msg := `{"role":"user","contents":[{"type":"text","text":"` + text + `"}]}`
	return []byte(`{"session":{"session_id":"bench","state_key":"history"},"request_messages":[` + msg + `],"response_messages":[` + msg + `]}`)
}

func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	wasm := pluginWasm(b)
	rewritten, err := instrument.Module(wasm)
	require.NoError(b, err)
	input := storeInput()
	for _, v := range []struct {
		name string
		wasm []byte
	}{{"rewritten", rewritten}, {"none", wasm}} {
		b.Run(v.name, func(b *testing.B) {
			c, err := compileIn(ctx, userCache(b), nil, v.wasm, testPages, false, false)
			require.NoError(b, err)
			b.Cleanup(func() { c.Close(ctx) })
			c.interruptible = v.name == "rewritten"
			in, err := newModule(nil, moduleKey{}, c).NewInstance(ctx, testPages)
			require.NoError(b, err)
			// Past the first calls' heap growth (see RATIONALE.md).
			for range 300 {
				_, err := in.Call(ctx, "store", input)
				require.NoError(b, err)
			}
			for b.Loop() {
				_, err := in.Call(ctx, "store", input)
				require.NoError(b, err)
			}
		})
	}
}
