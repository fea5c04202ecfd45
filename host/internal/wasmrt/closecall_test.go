//go:build linux

package wasmrt

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// TestReleaseUnderACallKeepsItsMemory: the last Release of a module (a
// Plugin.Close) while a call runs leaves the call its linear memory until
// the call ends. Freed at the Release, it went to the next instance of
// another module, and the old guest's store landed in that instance's
// memory (or, had nothing taken it, faulted and killed the process).
func TestReleaseUnderACallKeepsItsMemory(t *testing.T) {
	ctx := context.Background()
	// Count to 100,000,000 (long after the Release), store 0x41414141
	// at address 0, then spin until the deadline.
	code := []byte{0x03, 0x40, 0x20, 0x00, 0x41, 0x01, 0x6a, 0x22, 0x00, 0x41}
	code = wasmbin.AppendS32(code, 100_000_000)
	code = append(code, 0x49, 0x0d, 0x00, 0x0b, 0x41, 0x00, 0x41)
	code = wasmbin.AppendS32(code, 0x41414141)
	code = append(code, 0x36, 0x02, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00)
	writer := wasmtest.Module{Funcs: []wasmtest.Func{{Export: "spin", Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I32}, Code: code}}, Memory: true}.Bytes()
	victim := wasmtest.Module{Funcs: []wasmtest.Func{spinExport}, Memory: true}.Bytes()

	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	defer c.Close(ctx)
	e := NewEngine(c, []capability.Func{echoFunc})
	e.interpretFirst = false
	defer e.Close(ctx)
	m1, err := e.Compile(ctx, sha256.Sum256(writer), writer, testPages)
	require.NoError(t, err)
	m2, err := e.Compile(ctx, sha256.Sum256(victim), victim, testPages)
	require.NoError(t, err)
	defer m2.Release(ctx)

	in1, err := m1.NewInstance(ctx, testPages)
	require.NoError(t, err)
	base1 := uintptr(unsafe.Pointer(&in1.mem.memories[0].reserved[0]))
	done := make(chan error)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := in1.Call(cctx, "spin", nil)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, m1.Release(ctx)) // Plugin.Close: the last reference
	in2, err := m2.NewInstance(ctx, testPages)
	require.NoError(t, err)
	defer in2.Close(ctx)
	base2 := uintptr(unsafe.Pointer(&in2.mem.memories[0].reserved[0]))
	require.NotEqual(t, base1, base2, "the new instance was given the memory of a running call")
	err = <-done
	require.ErrorIs(t, err, hosterr.ErrTimeout, "the old call ends at its deadline")
	b, ok := in2.mod.Memory().Read(0, 4)
	require.True(t, ok)
	require.Equal(t, []byte{0, 0, 0, 0}, b, "another plugin's guest wrote into this instance's memory")
	b, ok = in1.mod.Memory().Read(0, 4)
	require.True(t, ok)
	require.Equal(t, []byte{0x41, 0x41, 0x41, 0x41}, b, "the old guest's store is in its own memory")
	require.NoError(t, in1.Close(ctx))
	_, err = m1.NewInstance(ctx, testPages)
	require.Error(t, err, "an instance of a released module")
}
