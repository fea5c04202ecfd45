package sqlgrant_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(fds)
}

// TestHostCloseReleasesFiles: a Host that served several tenant databases
// holds their files open while it runs, and Close gives back every file
// descriptor it took (databases, WAL and shared-memory files, the
// compilation cache).
func TestHostCloseReleasesFiles(t *testing.T) {
	ctx := t.Context()
	wasm := sdktest.BuildPlugin(t, "github.com/wasmhist/wasmhist/plugins/sqlite")
	dir := t.TempDir()
	const tenants = 4
	round := func() (during int) {
		h, err := host.New(ctx, host.Config{})
		require.NoError(t, err)
		p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(perTenant(dir))}})
		require.NoError(t, err)
		for i := range tenants {
			tctx := context.WithValue(ctx, tenantKey{}, fmt.Sprintf("tenant%d", i))
			msg, err := json.Marshal(abi.NewMessage(abi.RoleUser, "hello"))
			require.NoError(t, err)
			reply, err := json.Marshal(abi.NewMessage(abi.RoleAssistant, "hi"))
			require.NoError(t, err)
			facts := abi.SessionFacts{SessionID: "s", StateKey: "k"}
			_, state, err := p.ProvideState(tctx, facts, p.InitialState(), []json.RawMessage{msg})
			require.NoError(t, err, "tenant%d", i)
			_, err = p.StoreState(tctx, facts, state, []json.RawMessage{msg}, []json.RawMessage{reply})
			require.NoError(t, err, "tenant%d", i)
		}
		during = openFDs(t)
		require.NoError(t, h.Close(context.Background()))
		return during
	}
	// The first round also creates what lives as long as the process (the
	// runtime's poller); the second shows what a Host leaves behind.
	round()
	before := openFDs(t)
	during := round()
	after := openFDs(t)
	t.Logf("open file descriptors: %d before, %d with %d tenants served, %d after Close", before, during, tenants, after)
	require.GreaterOrEqual(t, during, before+tenants, "the tenants' databases were not open while the Host ran")
	require.Equal(t, before, after, "file descriptors left open after Host.Close")
}
