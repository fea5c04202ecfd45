package host_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/session"
)

// inmemoryWasm is the sample plugin that keeps history in the session
// state; `make plugins` builds it before the tests run.
const inmemoryWasm = "../plugins/inmemory/inmemory.wasm"

// Loading checks the plugin before any of its code runs, then asks it to
// describe itself: what Info and Exports return is what the plugin said
// and what its module exports.
func ExampleHost_Load() {
	ctx := context.Background()
	// Compiled plugins are cached on disk across processes; the zero
	// Config picks the user's cache directory, this example a fresh one.
	cache, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cache)

	h, err := host.New(ctx, host.Config{CacheDir: cache})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)

	p, err := h.Load(ctx, host.File(inmemoryWasm), host.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Info().Name, p.Info().Version)
	fmt.Println(p.Exports())
	fmt.Println(len(p.SHA256()), "hex digits of sha256")
	// Output:
	// inmemory 0.1.0
	// [describe provide store list clear migrate_state]
	// 64 hex digits of sha256
}

// A plugin serves history through a Provider bound to one state key of a
// session: Store records a run's messages in the session's slot, Provide
// returns them as the history of the next run. The session is plain data;
// the plugin keeps nothing between calls.
func ExamplePlugin_Provider() {
	ctx := context.Background()
	cache, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cache)
	h, err := host.New(ctx, host.Config{CacheDir: cache})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	p, err := h.Load(ctx, host.File(inmemoryWasm), host.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}

	history := p.Provider("history")
	s := session.New()
	request := []abi.Message{abi.NewMessage(abi.RoleUser, "I like Italian food")}
	response := []abi.Message{abi.NewMessage(abi.RoleAssistant, "Noted.")}
	if err := history.Store(ctx, s, request, response); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("slot %q owned by %s\n", history.StateKey(), s.State["history"].Provider)

	msgs, err := history.Provide(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, "What food do I like?")})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Printf("%s: %s\n", m.Role, m.TextContent())
	}
	// Output:
	// slot "history" owned by inmemory
	// user: I like Italian food
	// assistant: Noted.
}

// LoadOptions.SHA256 pins the plugin's bytes: the whole hex sum, as
// Plugin.SHA256 or `wasmhist inspect` print it. Anything else, a prefix
// included, is refused before the plugin runs, with ErrChecksumMismatch
// naming both sums.
func ExampleLoadOptions_sha256() {
	ctx := context.Background()
	cache, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cache)
	h, err := host.New(ctx, host.Config{CacheDir: cache})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)

	wasm, err := os.ReadFile(inmemoryWasm)
	if err != nil {
		log.Fatal(err)
	}
	first, err := h.Load(ctx, host.Bytes("inmemory.wasm", wasm), host.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	sum := first.SHA256()

	pinned, err := h.Load(ctx, host.Bytes("inmemory.wasm", wasm), host.LoadOptions{SHA256: sum})
	fmt.Println("full sum:", pinned.Info().Name, err)

	_, err = h.Load(ctx, host.Bytes("inmemory.wasm", wasm), host.LoadOptions{SHA256: sum[:12]})
	fmt.Println("prefix:", errors.Is(err, host.ErrChecksumMismatch))
	// The sum depends on the Go version that built the plugin.
	fmt.Println(strings.NewReplacer(sum, "<sum>", sum[:12], "<prefix>").Replace(err.Error()))
	// Output:
	// full sum: inmemory <nil>
	// prefix: true
	// host: load inmemory.wasm: checksum mismatch: expected <prefix>, got <sum>
}

// Limits bound every call of a plugin. Config.Limits are a host's
// defaults, LoadOptions.Limits override them per plugin, and zero fields
// take DefaultLimits. A call past a limit fails with its sentinel and
// leaves the session unchanged; limits out of range fail the load.
func ExampleLimits() {
	ctx := context.Background()
	cache, err := os.MkdirTemp("", "wasmhist-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(cache)
	h, err := host.New(ctx, host.Config{CacheDir: cache})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)

	fmt.Println("default call timeout:", host.DefaultLimits().CallTimeout)

	p, err := h.Load(ctx, host.File(inmemoryWasm), host.LoadOptions{
		Limits: host.Limits{MaxInputBytes: 4 << 10}, // requests of at most 4 KiB
	})
	if err != nil {
		log.Fatal(err)
	}
	s := session.New()
	long := abi.NewMessage(abi.RoleUser, strings.Repeat("la ", 2000))
	err = p.Provider("history").Store(ctx, s, []abi.Message{long}, nil)
	fmt.Println("6 KB message:", errors.Is(err, host.ErrInputTooLarge), "revision", s.Revision, "slots", len(s.State))

	_, err = h.Load(ctx, host.File(inmemoryWasm), host.LoadOptions{
		Limits: host.Limits{MemoryPages: 16}, // 1 MiB: too small for a Go plugin
	})
	fmt.Println("16 pages:", errors.Is(err, host.ErrInvalidConfig))
	// Output:
	// default call timeout: 5s
	// 6 KB message: true revision 0 slots 0
	// 16 pages: true
}
