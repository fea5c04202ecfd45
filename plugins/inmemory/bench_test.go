//go:build !wasip1

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/plugins/inmemory/provider"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// BenchmarkTurn measures one conversation turn's history work — provide,
// then store of the new user message and the reply — against a session that
// already holds N messages of about 500 bytes, through the in-memory plugin
// as WebAssembly (preemptible calls under the default deadline) and through
// the same provider code loaded natively in the same host (the floor).
//
// Each iteration starts from a session of N messages plus one stored by an
// untimed store, as in a running conversation where the previous turn's
// store produced the state this turn reads.
func BenchmarkTurn(b *testing.B) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(b, err)
	defer h.Close(ctx)

	wasm, err := h.Load(ctx, host.File(sdktest.BuildPlugin(b, "github.com/wasmhist/wasmhist/plugins/inmemory")), host.LoadOptions{})
	require.NoError(b, err)
	native, err := h.LoadNative(ctx, provider.Name, sdk.Handler(provider.Provider{}), host.LoadOptions{})
	require.NoError(b, err)
	plugins := []struct {
		name string
		p    *host.Plugin
	}{{"wasm", wasm}, {"native", native}}

	user, reply := benchMessage(abi.RoleUser, 0), benchMessage(abi.RoleAssistant, 1)
	request := []abi.Message{user}
	for _, n := range []int{10, 100, 1000} {
		for _, pl := range plugins {
			prov := pl.p.Provider("history")
			base := seedSession(b, prov, n)
			for _, op := range []string{"turn", "provide", "store"} {
				b.Run(fmt.Sprintf("%s/%s/messages=%d", op, pl.name, n), func(b *testing.B) {
					b.ReportAllocs()
					// Plain checks in the loop: the timed work is the
					// host's and the plugin's, not assertion machinery.
					for b.Loop() {
						b.StopTimer()
						s := base.Clone()
						// The untimed warm-up store (of the previous turn's
						// reply) leaves the state as a previous turn would:
						// produced by the host, known to its caches.
						if err := prov.Store(ctx, s, nil, []abi.Message{reply}); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						if op != "store" {
							hist, err := prov.Provide(ctx, s, request)
							if err != nil {
								b.Fatal(err)
							}
							if len(hist) != n+1 {
								b.Fatalf("provide returned %d messages, want %d", len(hist), n+1)
							}
						}
						if op != "provide" {
							if err := prov.Store(ctx, s, request, []abi.Message{reply}); err != nil {
								b.Fatal(err)
							}
						}
					}
				})
			}
		}
	}
}

// seedSession returns a session whose provider slot holds n messages.
func seedSession(b *testing.B, prov agent.HistoryProvider, n int) *session.Session {
	b.Helper()
	s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "bench"}
	batch := make([]abi.Message, 0, 100)
	for i := 0; i < n; i++ {
		role := abi.RoleUser
		if i%2 == 1 {
			role = abi.RoleAssistant
		}
		batch = append(batch, benchMessage(role, i))
		if len(batch) == cap(batch) || i == n-1 {
			require.NoError(b, prov.Store(context.Background(), s, batch, nil))
			batch = batch[:0]
		}
	}
	return s.Clone()
}

// benchMessage is a message of about 500 bytes of JSON.
func benchMessage(role abi.Role, i int) abi.Message {
	text := fmt.Sprintf("message %d: ", i) + strings.Repeat("lorem ipsum dolor sit amet ", 15)
	m := abi.NewMessage(role, text)
	m.MessageID = fmt.Sprintf("msg-%06d", i)
	m.CreatedAt = "2026-11-21T10:00:00Z"
	return m
}

// BenchmarkListPage measures one list page of 100 messages, from the
// middle of a history of N short messages, through the in-memory plugin as
// WebAssembly. list omits the state and answers by reference (ABI 1.1), so
// the page should cost about the same whatever N. The session is built
// once as state JSON; its first, untimed page leaves the indexed document in
// the plugin's cache, as a previous page or store would.
func BenchmarkListPage(b *testing.B) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(b, err)
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(sdktest.BuildPlugin(b, "github.com/wasmhist/wasmhist/plugins/inmemory")), host.LoadOptions{})
	require.NoError(b, err)
	for _, n := range []int{1000, 100_000} {
		var data strings.Builder
		data.WriteString(`{"messages":[`)
		for i := range n {
			if i > 0 {
				data.WriteByte(',')
			}
			fmt.Fprintf(&data, `{"role":"user","contents":[{"type":"text","text":"message %d of a long chat"}]}`, i)
		}
		data.WriteString(`]}`)
		s := &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "bench",
			State: map[string]session.ProviderState{"history": {Provider: provider.Name, StateVersion: provider.StateVersion, Data: []byte(data.String())}}}
		cursor := strconv.Itoa(n / 2)
		page, _, err := p.List(ctx, s, "history", cursor, 100)
		require.NoError(b, err)
		require.Len(b, page, 100)
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				page, _, err := p.List(ctx, s, "history", cursor, 100)
				if err != nil || len(page) != 100 {
					b.Fatalf("page of %d, %v", len(page), err)
				}
			}
		})
	}
}

// BenchmarkInMemoryScale measures provide (no window: the whole history),
// provide with a window of 200 messages, and store (one turn's two messages) through the in-memory plugin as
// WebAssembly against histories of 1k, 10k and 100k messages of about 500
// bytes, to show how each grows with the history: it must not grow faster
// than the history does. The state is built once as JSON; an untimed store
// leaves its indexed document in the host's cache, as a previous turn
// would. Each store appends to the same session, so the history grows by
// two messages an iteration (run with a fixed -benchtime such as 20x).
//
// Besides wall time each reports cpu-ns/op, the process's CPU time (user
// and system, the collector's included) per iteration, which a machine
// loaded by other work disturbs far less.
func BenchmarkInMemoryScale(b *testing.B) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(b, err)
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(sdktest.BuildPlugin(b, "github.com/wasmhist/wasmhist/plugins/inmemory")), host.LoadOptions{})
	require.NoError(b, err)
	// Every call measured runs the compiled code, not the interpreter a
	// never-seen build starts on.
	require.NoError(b, p.Compiled(ctx))
	prov := p.Provider("history")
	// The same build with a window of the newest 200 messages.
	pw, err := h.Load(ctx, host.File(sdktest.BuildPlugin(b, "github.com/wasmhist/wasmhist/plugins/inmemory")), host.LoadOptions{Config: []byte(`{"max_messages":200}`)})
	require.NoError(b, err)
	require.NoError(b, pw.Compiled(ctx))
	windowed := pw.Provider("history")
	user, reply := benchMessage(abi.RoleUser, 0), benchMessage(abi.RoleAssistant, 1)
	request := []abi.Message{user}
	for _, n := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			s := scaleSession(b, n)
			require.NoError(b, prov.Store(ctx, s, nil, []abi.Message{reply}))
			b.Run("provide", func(b *testing.B) {
				cpu := cpuTime()
				for b.Loop() {
					hist, err := prov.Provide(ctx, s, request)
					if err != nil || len(hist) != n+1 {
						b.Fatalf("provide returned %d messages, want %d: %v", len(hist), n+1, err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			})
			b.Run("windowed-provide", func(b *testing.B) {
				if _, err := windowed.Provide(ctx, s, request); err != nil { // its first call indexes the state
					b.Fatal(err)
				}
				// The first call's garbage is not the timed calls': collected
				// now, as the testing package collects before a benchmark.
				runtime.GC()
				cpu := cpuTime()
				for b.Loop() {
					hist, err := windowed.Provide(ctx, s, request)
					if err != nil || len(hist) != 200 {
						b.Fatalf("provide returned %d messages, want 200: %v", len(hist), err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			})
			b.Run("store", func(b *testing.B) {
				cpu := cpuTime()
				for b.Loop() {
					if err := prov.Store(ctx, s, request, []abi.Message{reply}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			})
		})
	}
}

// cpuTime is the CPU time the process has used, user and system, in
// nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// scaleSession returns a session whose "history" slot holds n messages of
// about 500 bytes, built as state JSON rather than stored turn by turn.
func scaleSession(b *testing.B, n int) *session.Session {
	b.Helper()
	var data bytes.Buffer
	data.WriteString(`{"messages":[`)
	for i := range n {
		if i > 0 {
			data.WriteByte(',')
		}
		role := abi.RoleUser
		if i%2 == 1 {
			role = abi.RoleAssistant
		}
		m := benchMessage(role, i)
		raw, err := json.Marshal(&m)
		require.NoError(b, err)
		data.Write(raw)
	}
	data.WriteString(`]}`)
	return &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "bench",
		State: map[string]session.ProviderState{"history": {Provider: provider.Name, StateVersion: provider.StateVersion, Data: data.Bytes()}}}
}
