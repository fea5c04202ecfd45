package portable_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
)

// messageAt is message i of a generated history of turns (a question, a
// tool call, its result, an answer), made on demand so that a long history
// is never in memory as a whole.
func messageAt(i int, text string) abi.Message {
	id := fmt.Sprintf("call_%d", i/4)
	switch i % 4 {
	case 0:
		return abi.Message{Role: abi.RoleUser, Contents: []abi.Content{abi.Text(fmt.Sprintf("question %d %s", i, text))}, CreatedAt: "2026-01-02T03:04:05Z"}
	case 1:
		return abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{{Type: abi.ContentFunctionCall, CallID: id, Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}}}
	case 2:
		return abi.Message{Role: abi.RoleTool, Contents: []abi.Content{{Type: abi.ContentFunctionResult, CallID: id, Result: json.RawMessage(`"found"`)}}}
	}
	return abi.Message{Role: abi.RoleAssistant, Contents: []abi.Content{abi.Text(fmt.Sprintf("answer %d %s", i, text))}, MessageID: fmt.Sprintf("m%d", i)}
}

func oneSlot() *session.Session {
	return &session.Session{SchemaVersion: session.SchemaVersion, SessionID: "long", Revision: 1,
		State: map[string]session.ProviderState{"history": {Provider: "sqlite", StateVersion: 1, Data: json.RawMessage(`{}`)}}}
}

// memoryPeak samples the heap in use and the memory obtained from the
// system, and keeps the largest growth over a baseline.
type memoryPeak struct {
	heap0, sys0 uint64
	heap, sys   uint64
}

func newMemoryPeak() *memoryPeak {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &memoryPeak{heap0: ms.HeapInuse, sys0: ms.Sys}
}

func (p *memoryPeak) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > p.heap0 {
		p.heap = max(p.heap, ms.HeapInuse-p.heap0)
	}
	if ms.Sys > p.sys0 {
		p.sys = max(p.sys, ms.Sys-p.sys0)
	}
}

// TestHundredThousandMessagesInBoundedMemory: a session of 100,000
// messages (about 100 MiB of document) exports and imports with the
// process's memory growing by at most 64 MiB.
func TestHundredThousandMessagesInBoundedMemory(t *testing.T) {
	const n, bound = 100_000, 64 << 20
	text := strings.Repeat("lorem ipsum ", 160) // every other message: ~1 KiB a message on average
	path := filepath.Join(t.TempDir(), "long.json")

	f, err := os.Create(path)
	require.NoError(t, err)
	peak := newMemoryPeak()
	w, err := portable.NewWriter(f, oneSlot())
	require.NoError(t, err)
	require.NoError(t, w.BeginSlot("history"))
	for i := range n {
		require.NoError(t, w.WriteMessage(messageAt(i, text)))
		if i%1000 == 0 {
			peak.sample()
		}
	}
	require.NoError(t, w.Close())
	peak.sample()
	require.NoError(t, f.Close())
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(bound*3/2), "the document must be larger than the bound for the test to mean anything")
	t.Logf("export: %d MiB document, heap in use grew by at most %.1f MiB, memory from the system by %.1f MiB", st.Size()>>20, mib(peak.heap), mib(peak.sys))
	assert.LessOrEqual(t, peak.heap, uint64(bound), "export: heap in use")
	assert.LessOrEqual(t, peak.sys, uint64(bound), "export: memory from the system")

	f, err = os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	peak = newMemoryPeak()
	r, err := portable.NewReader(bufio.NewReader(f), portable.Limits{})
	require.NoError(t, err)
	var got int
	for sr, err := range r.Slots() {
		require.NoError(t, err)
		for m, err := range sr.Messages() {
			require.NoError(t, err)
			if got%1000 == 0 {
				require.Equal(t, messageAt(got, text), m)
				peak.sample()
			}
			got++
		}
	}
	peak.sample()
	require.Equal(t, n, got)
	t.Logf("import: heap in use grew by at most %.1f MiB, memory from the system by %.1f MiB", mib(peak.heap), mib(peak.sys))
	assert.LessOrEqual(t, peak.heap, uint64(bound), "import: heap in use")
	assert.LessOrEqual(t, peak.sys, uint64(bound), "import: memory from the system")
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
