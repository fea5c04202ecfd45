package agent_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// BenchmarkCommit runs one turn (provide, the model, store, commit) through
// the sqlite plugin per iteration, with the session in a file beside the
// plugin's database, in the plugin's own database (one transaction), or in
// another SQLite database. Every commit is durable (synchronous=FULL,
// fsync of the file and its directory). The session holds 20 messages
// before the first timed turn.
func BenchmarkCommit(b *testing.B) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(b, err)
	defer h.Close(ctx)
	wasm := sdktest.BuildPlugin(b, "../../plugins/sqlite")
	for _, kind := range storeKinds {
		b.Run(kind.name, func(b *testing.B) {
			rig := newCommitRig(b, h, wasm, kind.open)
			for i := range 10 {
				_, err := rig.turn(b, "s", fmt.Sprint("warm ", i), "")
				require.NoError(b, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := rig.turn(b, "s", fmt.Sprint("line ", i), ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
