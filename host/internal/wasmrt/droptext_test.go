//go:build linux

package wasmrt

import (
	"context"
	"encoding/binary"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mappedPages counts the pages of b (which starts at a page boundary)
// that the process's page table maps (/proc/self/pagemap): for a mapping
// of a file, mincore would report the page cache instead.
func mappedPages(t *testing.T, b []byte) int {
	t.Helper()
	page := syscall.Getpagesize()
	f, err := os.Open("/proc/self/pagemap")
	require.NoError(t, err)
	defer f.Close()
	entries := make([]byte, 8*(len(b)/page))
	_, err = f.ReadAt(entries, int64(uintptr(unsafe.Pointer(&b[0]))/uintptr(page))*8)
	require.NoError(t, err)
	n := 0
	for i := 0; i < len(entries); i += 8 {
		if binary.LittleEndian.Uint64(entries[i:])&(1<<63) != 0 {
			n++
		}
	}
	return n
}

// storeRequest is a store of one message.
var storeRequest = []byte(`{"session":{"session_id":"s","state_key":"k"},"request_messages":[{"role":"user","contents":[{"type":"text","text":"hello"}]}],"response_messages":[]}`)

// mappedInstance compiles a build of the test plugin of the test's own,
// whose code is mapped from the cache, and returns the module, its code
// and a new instance, closed when the test ends. Its own: wazero hands
// the code of one module compiled twice on one cache to both, and only
// the first maps it, so the plugin as another test compiles it meanwhile
// may have no mapping here.
func mappedInstance(t testing.TB) (*Module, []byte, *Instance) {
	t.Helper()
	ctx := context.Background()
	const name = "wasmhist-test"
	payload := append(append([]byte{byte(len(name))}, name...), t.Name()...)
	wasm := append(slices.Clone(pluginWasm(t)), 0) // a custom section
	wasm = append(binary.AppendUvarint(wasm, uint64(len(payload))), payload...)
	m := compileOn(t, "compiler", wasm, testPages)
	code := m.cur.Load().text
	require.NotEmpty(t, code, "the module's code is mapped from the cache")
	in, err := m.NewInstance(ctx, testPages)
	require.NoError(t, err)
	t.Cleanup(func() { in.Close(ctx) })
	return m, code, in
}

// TestDropTextAfterInit: once an instance's guest runtime has initialised,
// none of its module's machine code stays in the process (the pages its
// start ran, and those wazero's checksum read, stay in the page cache);
// the code then runs as before, on that instance and on instances started
// later, also while another instance starts and gives the code back.
func TestDropTextAfterInit(t *testing.T) {
	ctx := context.Background()
	m, code, in := mappedInstance(t)
	started := -1
	in.testStarted = func() { started = mappedPages(t, code) }
	_, err := in.Call(ctx, "describe", nil)
	require.NoError(t, err)
	require.Zero(t, started, "pages of the module's code mapped once the guest started, of %d", len(code)/syscall.Getpagesize())
	assert.NotZero(t, mappedPages(t, code), "describe ran no code")

	store := storeRequest
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if _, err := in.Call(ctx, "store", store); !assert.NoError(t, err) {
				return
			}
		}
	}()
	for range 3 {
		other, err := m.NewInstance(ctx, testPages)
		require.NoError(t, err)
		_, err = other.Call(ctx, "store", store)
		require.NoError(t, err)
		require.NoError(t, other.Close(ctx))
	}
	wg.Wait()
}

// TestIdleCodeIsGivenBack: a module whose code went idleText without a
// call gives its resident pages back, and runs as before on the next
// call; a call that runs holds them, even when an earlier call's timer
// fires during it.
func TestIdleCodeIsGivenBack(t *testing.T) {
	defer func(d time.Duration) { idleText = d }(idleText)
	idleText = 100 * time.Millisecond
	ctx := context.Background()
	_, code, in := mappedInstance(t)
	store := storeRequest

	// A call that runs past idleText keeps the code: its pages are
	// mapped when it returns, though the first call's timer fired.
	_, err := in.Call(ctx, "store", store)
	require.NoError(t, err)
	in.testReturned = func() {
		time.Sleep(3 * idleText)
		assert.NotZero(t, mappedPages(t, code), "the code was given back under a running call")
	}
	_, err = in.Call(ctx, "store", store)
	require.NoError(t, err)
	in.testReturned = nil
	require.NotZero(t, mappedPages(t, code), "store ran no code")

	require.Eventually(t, func() bool { return mappedPages(t, code) == 0 }, 20*idleText, idleText/4,
		"code pages still mapped after the module was idle")
	_, err = in.Call(ctx, "store", store)
	require.NoError(t, err, "the code runs again after it was given back")
	assert.NotZero(t, mappedPages(t, code))
}
