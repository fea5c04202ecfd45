package peer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// BenchmarkPeerTurn measures one conversation turn's history work, as
// plugins/inmemory's BenchmarkTurn does (an untimed store of the previous
// reply onto a session of N messages of about 500 bytes, then the timed
// provide with the new user message and store of the turn), through three
// plugins in one host serving the same provider code
// (plugins/inmemory/provider):
//
//   - wasm: the in-memory plugin as WebAssembly, default limits;
//   - native: the provider loaded with host.LoadNative, no boundary;
//   - goplugin: the provider in a hashicorp/go-plugin process, over gRPC,
//     loaded with host.LoadNative and a handler that forwards each call.
//
// The machine it runs on is shared and noisy, so the three are not run one
// after the other: every iteration runs one turn of each, in an order that
// rotates, and each is timed on its own. The benchmark's ns/op is thus a
// round of three turns and their untimed resets; the figures are the
// metrics: per variant, the turn and the store in it (ns/op), the bytes
// and objects allocated in the host process during the turn (B/op,
// allocs/op; a WebAssembly guest's own heap is its linear memory and is not
// counted), for goplugin also those allocated in the plugin process, and
// the ratios of this run. The plugin process is started once.
func BenchmarkPeerTurn(b *testing.B) {
	ctx := context.Background()
	cfg := host.Config{CacheDir: tempDir + "/cache-turn"}
	// A plugin's first use runs on wazero's interpreter until its
	// compilation ends; a first host's Close waits for it, so that every
	// turn measured runs the compiled code.
	first, err := host.New(ctx, cfg)
	require.NoError(b, err)
	_, err = first.Load(ctx, host.File(wasmPlugin(b)), host.LoadOptions{})
	require.NoError(b, err)
	require.NoError(b, first.Close(ctx))
	h, err := host.New(ctx, cfg)
	require.NoError(b, err)
	defer h.Close(ctx)

	wasm, err := h.Load(ctx, host.File(wasmPlugin(b)), host.LoadOptions{})
	require.NoError(b, err)
	native, err := loadNative(ctx, h)
	require.NoError(b, err)
	gp, client, err := loadGoPlugin(ctx, h, pluginBinary(b))
	require.NoError(b, err)
	defer client.Kill()

	// What one read of the plugin's counters allocates there itself; taken
	// off the plugin figures.
	statsCost := pluginStatsCost(b, ctx, client)

	const wasmI, nativeI, goI = 0, 1, 2
	names := []string{"wasm", "native", "goplugin"}
	plugins := []*host.Plugin{wasm, native, gp}

	user, reply := benchMessage(abi.RoleUser, 0), benchMessage(abi.RoleAssistant, 1)
	request := []abi.Message{user}
	for _, n := range []int{10, 100, 1000} {
		provs := make([]*host.Provider, len(plugins))
		bases := make([]*session.Session, len(plugins))
		for i, p := range plugins {
			provs[i] = p.Provider("history")
			bases[i] = seedSession(b, provs[i], n)
		}
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			var turn, store [3]time.Duration
			var bytes, objects [3]uint64
			var pluginBytes, pluginObjects uint64
			i := 0
			for b.Loop() {
				for k := range plugins {
					v := (i + k) % len(plugins)
					prov := provs[v]
					s := bases[v].Clone()
					// The untimed store of the previous turn's reply
					// leaves the state as a previous turn would.
					if err := prov.Store(ctx, s, nil, []abi.Message{reply}); err != nil {
						b.Fatal(err)
					}
					var pb0, po0 uint64
					if v == goI {
						if pb0, po0, err = client.HeapAllocs(ctx); err != nil {
							b.Fatal(err)
						}
					}
					b0, o0 := HeapAllocs()
					t0 := time.Now()
					hist, err := prov.Provide(ctx, s, request)
					if err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if err := prov.Store(ctx, s, request, []abi.Message{reply}); err != nil {
						b.Fatal(err)
					}
					t2 := time.Now()
					b1, o1 := HeapAllocs()
					if len(hist) != n+1 {
						b.Fatalf("%s: provide returned %d messages, want %d", names[v], len(hist), n+1)
					}
					turn[v] += t2.Sub(t0)
					store[v] += t2.Sub(t1)
					bytes[v] += b1 - b0
					objects[v] += o1 - o0
					if v == goI {
						pb1, po1, err := client.HeapAllocs(ctx)
						if err != nil {
							b.Fatal(err)
						}
						pluginBytes += pb1 - pb0 - min(statsCost[0], pb1-pb0)
						pluginObjects += po1 - po0 - min(statsCost[1], po1-po0)
					}
				}
				i++
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
			for v, name := range names {
				b.ReportMetric(per(turn[v]), name+"-turn-ns/op")
				b.ReportMetric(per(store[v]), name+"-store-ns/op")
				b.ReportMetric(float64(bytes[v])/float64(b.N), name+"-B/op")
				b.ReportMetric(float64(objects[v])/float64(b.N), name+"-allocs/op")
			}
			b.ReportMetric(float64(pluginBytes)/float64(b.N), "goplugin-plugin-B/op")
			b.ReportMetric(float64(pluginObjects)/float64(b.N), "goplugin-plugin-allocs/op")
			b.ReportMetric(float64(turn[wasmI])/float64(turn[goI]), "wasm/goplugin-turn")
			b.ReportMetric(float64(turn[wasmI])/float64(turn[nativeI]), "wasm/native-turn")
			b.ReportMetric(float64(store[wasmI])/float64(store[nativeI]), "wasm/native-store")
			b.ReportMetric(float64(store[wasmI])/float64(store[goI]), "wasm/goplugin-store")
			b.ReportMetric(float64(bytes[wasmI])/float64(bytes[nativeI]), "wasm/native-B")
			b.ReportMetric(loadAvg(), "loadavg")
		})
	}
}

// pluginStatsCost is the median growth of the plugin process's counters
// between two back-to-back reads: what one read allocates there.
func pluginStatsCost(b *testing.B, ctx context.Context, c *Client) [2]uint64 {
	const reads = 21
	var db, do []uint64
	pb, po, err := c.HeapAllocs(ctx)
	require.NoError(b, err)
	for range reads {
		nb, no, err := c.HeapAllocs(ctx)
		require.NoError(b, err)
		db, do = append(db, nb-pb), append(do, no-po)
		pb, po = nb, no
	}
	return [2]uint64{median(db), median(do)}
}

func median(xs []uint64) uint64 {
	s := append([]uint64(nil), xs...)
	for i := range s { // insertion sort: a handful of values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
