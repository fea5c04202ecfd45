package host_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// TestCloseDuringCall closes a plugin, then its host, while calls on it
// still run compiled code that writes its memory, and loads and closes
// other plugins meanwhile. The code and the memory must outlive the calls:
// unmapped under a running call, the process dies of a fault, and mapped
// again for another instance, the old call writes into it. Each call ends
// at its deadline, as it would have without the close.
func TestCloseDuringCall(t *testing.T) {
	ctx := context.Background()
	path := hostilePath(t, "spins")
	warmCompiled(t, path, host.LoadOptions{})
	for _, what := range []string{"plugin", "host"} {
		t.Run(what, func(t *testing.T) {
			h, err := host.New(ctx, host.Config{})
			require.NoError(t, err)
			opts := host.LoadOptions{Limits: host.Limits{CallTimeout: 1500 * time.Millisecond, MaxInstances: 4}}
			p, err := h.Load(ctx, host.File(path), opts)
			require.NoError(t, err)
			require.NoError(t, p.Compiled(ctx))
			prov := p.Provider("history")

			const calls = 3
			var wg sync.WaitGroup
			errs := make([]error, calls)
			for i := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "spin"}
					_, errs[i] = prov.Provide(ctx, s, []abi.Message{user("hi")})
				}()
			}
			time.Sleep(300 * time.Millisecond)
			if what == "plugin" {
				require.NoError(t, p.Close(ctx))
			}
			require.NoError(t, h.Close(ctx))
			// Give freed code every chance to be unmapped and its
			// addresses reused while the calls still spin.
			other, err := host.New(ctx, host.Config{})
			require.NoError(t, err)
			for range 3 {
				runtime.GC()
				q, err := other.Load(ctx, host.File(hostilePath(t, "misbehave")), host.LoadOptions{})
				require.NoError(t, err)
				require.NoError(t, q.Close(ctx))
			}
			wg.Wait()
			require.NoError(t, other.Close(ctx))
			for _, err := range errs {
				assert.ErrorIs(t, err, host.ErrTimeout)
			}
		})
	}
}
