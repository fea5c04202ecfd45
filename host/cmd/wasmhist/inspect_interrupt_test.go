package main

import (
	"bytes"
	leb "encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInspectTellsTheStartFunctionFlag: the AssemblyScript sample takes
// the fast path; the same module with its _initialize made a start
// function, as the Extism kit's documented build makes it, is told the
// flag that avoids the slow path.
func TestInspectTellsTheStartFunctionFlag(t *testing.T) {
	wasm, err := os.ReadFile("../../../plugins/asmemory/asmemory.wasm")
	require.NoError(t, err, "run `make plugins` first")
	assert.Equal(t, "checks added by the host (the fast path)", interruptPath("../../../plugins/asmemory/asmemory.wasm"))

	started := filepath.Join(t.TempDir(), "started.wasm")
	require.NoError(t, os.WriteFile(started, withStart(t, wasm, "_initialize"), 0o644))
	got := interruptPath(started)
	assert.Contains(t, got, "the runtime's preemption")
	assert.Contains(t, got, "a start function")
	assert.Contains(t, got, "asc --exportStart _initialize")
}

// withStart returns wasm with a start section naming the function it
// exports as export.
func withStart(t *testing.T, wasm []byte, export string) []byte {
	t.Helper()
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := bytes.NewReader(wasm[8:])
	for r.Len() > 0 {
		id, _ := r.ReadByte()
		n, err := leb.ReadUvarint(r)
		require.NoError(t, err)
		body := make([]byte, n)
		_, err = r.Read(body)
		require.NoError(t, err)
		secs = append(secs, section{id, body})
	}
	fn := -1
	for _, s := range secs {
		if s.id != 7 {
			continue
		}
		er := bytes.NewReader(s.body)
		count, _ := leb.ReadUvarint(er)
		for range count {
			n, _ := leb.ReadUvarint(er)
			name := make([]byte, n)
			_, _ = er.Read(name)
			kind, _ := er.ReadByte()
			idx, _ := leb.ReadUvarint(er)
			if kind == 0 && string(name) == export {
				fn = int(idx)
			}
		}
	}
	require.GreaterOrEqual(t, fn, 0, "no function export %q", export)
	out := bytes.Clone(wasm[:8])
	put := func(id byte, body []byte) {
		out = append(out, id)
		out = leb.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	done := false
	for _, s := range secs {
		if !done && (s.id == 9 || s.id == 12 || s.id == 10 || s.id == 11) {
			put(8, leb.AppendUvarint(nil, uint64(fn)))
			done = true
		}
		put(s.id, s.body)
	}
	require.True(t, done)
	return out
}
