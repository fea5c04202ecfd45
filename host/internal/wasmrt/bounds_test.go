package wasmrt

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// The bound every guest is held to, whatever its code: a call ends at
// most boundLate after its deadline, and a collection started elsewhere in
// the process waits at most boundLate for the guest (README, SPEC section
// 9).
const boundLate = 50 * time.Millisecond

// A gadget is a piece of code that leaves the stack as it found it, the
// most expensive the limits allow of its kind. An attack repeats a mix of
// them in a loop for ever.
type gadget struct {
	name string
	code []byte
}

const (
	attackPages  = testPages         // the default limit: 32 MiB
	attackMemory = attackPages << 16 // bytes
	attackTable  = instrument.MaxTableEntries
	attackData   = 1 << 16 // the passive data segment
	attackElems  = 1 << 12 // the passive element segment
)

func constI32(v int32) []byte { return wasmbin.AppendS32([]byte{0x41}, v) }

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

var gadgets = []gadget{
	{"memory.fill", cat(constI32(0), constI32(0), constI32(attackMemory), []byte{0xfc, 11, 0})},
	{"memory.copy up", cat(constI32(attackMemory/2), constI32(0), constI32(attackMemory/2), []byte{0xfc, 10, 0, 0})},
	{"memory.copy down", cat(constI32(0), constI32(attackMemory/2), constI32(attackMemory/2), []byte{0xfc, 10, 0, 0})},
	{"memory.copy overlapping", cat(constI32(1), constI32(0), constI32(attackMemory-1), []byte{0xfc, 10, 0, 0})},
	{"memory.init", cat(constI32(0), constI32(0), constI32(attackData), []byte{0xfc, 8, 0, 0})},
	{"memory.grow", cat(constI32(1), []byte{0x40, 0, 0x1a})},
	{"table.fill", cat(constI32(0), []byte{0xd0, 0x70}, constI32(attackTable), []byte{0xfc, 17, 0})},
	{"table.copy", cat(constI32(1), constI32(0), constI32(attackTable-1), []byte{0xfc, 14, 0, 0})},
	{"table.init", cat(constI32(0), constI32(0), constI32(attackElems), []byte{0xfc, 12, 0, 0})},
	{"table.grow", cat([]byte{0xd0, 0x70}, constI32(attackTable), []byte{0xfc, 15, 0, 0x1a})},
	// Calls of a function of straight divisions, the costliest
	// instructions per byte, from inside the loop.
	{"call", []byte{0x10, funcDivide}},
	// A recursion two calls wide and 40 deep, each frame dividing before it
	// returns: it runs long after its last call.
	{"recursion", cat(constI32(40), []byte{0x10, funcFork})},
	// A recursion as deep as the host lets calls nest, dividing on its
	// way out: the frames return one after another with no call between
	// them.
	{"deep recursion", cat(constI32(deepest(deepCode)), []byte{0x10, funcDeep})},
	// The same, each frame returning through as much code as it may
	// without a check.
	{"deep recursion, unchecked returns", cat(constI32(deepest(deepShortCode)), []byte{0x10, funcDeepShort})},
	{"division", divisions(100)},
}

// section appends a section of id with body to out.
func section(out []byte, id byte, body []byte) []byte {
	return append(wasmbin.AppendU32(append(out, id), uint32(len(body))), body...)
}

// Function indices of the attack module.
const (
	funcAttack = 0
	funcDivide = 1
	funcFork   = 2
	funcDeep   = 3
	// funcDeepShort is funcDeep returning through 3 divisions, the most
	// a frame may return through without a check (123 of 128 units).
	funcDeepShort = 4
)

// divisions is n 64-bit divisions, of 9 bytes each.
func divisions(n int) []byte {
	one := []byte{0x42, 0xff, 0xff, 0xff, 0xff, 0x07, 0x42, 0x03, 0x80, 0x1a} // i64.const, i64.const 3, i64.div_u, drop
	return slices.Repeat(one, n)
}

// deepCode is deep(n): if n { deep(n-1) }, then 100 divisions;
// deepShortCode the same with 3.
var (
	deepCode = cat([]byte{0x20, 0x00, 0x04, 0x40}, // if n
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, funcDeep}, // deep(n-1)
		[]byte{0x0b}, divisions(100))
	deepShortCode = cat([]byte{0x20, 0x00, 0x04, 0x40}, // if n
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, funcDeepShort}, // deepShort(n-1)
		[]byte{0x0b}, divisions(3))
)

// deepest is the most nested calls of a function of one parameter with
// code that the host lets run, from the attack function (whose frame is
// at most 4096 units).
func deepest(code []byte) int32 {
	return (instrument.MaxDepth-4096)/instrument.FrameUnits(len(code)+1, 1) - 1
}

// attackModule returns a module whose export "attack" first grows its
// memory and table to the limits, then runs body in a loop for ever.
func attackModule(body []byte) []byte {
	fn := func(code []byte) []byte {
		f := append([]byte{0}, code...) // no locals
		f = append(f, 0x0b)
		return append(wasmbin.AppendU32(nil, uint32(len(f))), f...)
	}
	prologue := cat(constI32(attackPages-1), []byte{0x40, 0, 0x1a}, // memory.grow to the limit
		[]byte{0xd0, 0x70}, constI32(attackTable), []byte{0xfc, 15, 0, 0x1a}) // table.grow to the limit
	attack := cat(prologue, []byte{0x03, 0x40}, body, []byte{0x0c, 0x00, 0x0b})
	fork := cat([]byte{0x20, 0x00, 0x04, 0x40}, // if n
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, funcFork}, // fork(n-1)
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, funcFork}, // fork(n-1)
		divisions(25), []byte{0x0b})

	out := slices.Clone(wasmbin.Header)
	out = section(out, wasmbin.SectionType, []byte{2, 0x60, 0, 0, 0x60, 1, 0x7f, 0})
	out = section(out, wasmbin.SectionFunction, []byte{5, 0, 0, 1, 1, 1})
	out = section(out, wasmbin.SectionTable, []byte{1, 0x70, 0x00, 0})
	out = section(out, wasmbin.SectionMemory, []byte{1, 0x00, 1})
	exports := wasmbin.AppendName([]byte{2}, "attack")
	exports = append(exports, 0x00, funcAttack)
	exports = append(wasmbin.AppendName(exports, "memory"), 0x02, 0)
	out = section(out, wasmbin.SectionExport, exports)
	elems := wasmbin.AppendU32([]byte{1, 0x01, 0x00}, attackElems) // passive, funcref
	for range attackElems {
		elems = append(elems, funcDivide)
	}
	out = section(out, wasmbin.SectionElement, elems)
	out = section(out, wasmbin.SectionDataCount, []byte{1})
	out = section(out, wasmbin.SectionCode, cat([]byte{5}, fn(attack), fn(divisions(100)), fn(fork), fn(deepCode), fn(deepShortCode)))
	data := wasmbin.AppendU32([]byte{1, 0x01}, attackData) // passive
	out = section(out, wasmbin.SectionData, append(data, make([]byte, attackData)...))
	return out
}

// lateness runs the attack in body until a deadline and returns how late
// after it the call ended, and how much longer than without the guest a
// collection started meanwhile took: how long it waited for the guest to
// stop (runtime.GC stops the world, and scans the guest's stack, which
// needs the guest to stop too).
func lateness(t testing.TB, m *Module, deadline time.Duration) (late, gc time.Duration) {
	t.Helper()
	ctx := context.Background()
	in, err := m.NewInstance(ctx, attackPages)
	require.NoError(t, err)
	defer in.Close(ctx)
	baseline := timeGC()
	for range 2 {
		baseline = min(baseline, timeGC())
	}
	gcDone := make(chan time.Duration, 1)
	time.AfterFunc(deadline/2, func() { gcDone <- timeGC() })
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	_, err = in.Call(dctx, "attack", nil)
	late = time.Since(start) - deadline
	if m.Interpreted() && errors.Is(err, hosterr.ErrTrap) && strings.Contains(err.Error(), "stack overflow") {
		// The interpreter nests calls at most 2000 deep: a deep
		// recursion traps there, before its deadline.
		require.Negative(t, late, "the interpreter's stack overflow ends the attack before its deadline")
		return late, max(<-gcDone-baseline, 0)
	}
	require.ErrorIs(t, err, hosterr.ErrTimeout, "the attack ends by its deadline")
	return late, max(<-gcDone-baseline, 0)
}

// withinBound measures the attack up to three times, until both figures
// are within boundLate, and returns the last. A guest that breaks the
// bound does so every time; a machine busy with other work delays a run
// now and then (the timer that sets the flag, or the test's goroutine,
// waits for a core), which a second run does not repeat.
func withinBound(t testing.TB, m *Module, deadline time.Duration) (late, gc time.Duration) {
	t.Helper()
	for range 3 {
		late, gc = lateness(t, m, deadline)
		t.Logf("late %v, collection %v", late, gc)
		if late <= boundLate && gc <= boundLate {
			break
		}
	}
	return late, gc
}

func timeGC() time.Duration {
	start := time.Now()
	runtime.GC()
	return time.Since(start)
}

func compileAttack(t testing.TB, kind string, body []byte) *Module {
	t.Helper()
	m := compileOn(t, kind, attackModule(body), attackPages)
	require.True(t, m.code().interruptible, "the attack is compiled rewritten")
	return m
}

// TestDeadlineHoldsForEveryInstruction: each gadget alone, twenty times in
// the loop, and all of them in one loop, at the largest sizes the default
// limits allow, on the compiler's code and on the interpreter's.
func TestDeadlineHoldsForEveryInstruction(t *testing.T) {
	cases := map[string][]byte{}
	var all []byte
	for _, g := range gadgets {
		cases[g.name] = slices.Repeat(g.code, 20)
		all = append(all, g.code...)
	}
	cases["all"] = all
	for _, kind := range engineKinds {
		for name, body := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				late, gc := withinBound(t, compileAttack(t, kind, body), 200*time.Millisecond)
				assert.LessOrEqual(t, late, boundLate, "how late after its deadline the call ended")
				assert.LessOrEqual(t, gc, boundLate, "how long a collection waited")
			})
		}
	}
}

// TestRecursionDeeperThanTheBoundTraps: calls nest at most
// instrument.MaxDepth deep; deeper, the call traps with an error that says
// so, well before its deadline.
func TestRecursionDeeperThanTheBoundTraps(t *testing.T) {
	for _, kind := range engineKinds {
		t.Run(kind, func(t *testing.T) {
			m := compileAttack(t, kind, cat(constI32(deepest(deepCode)+1100), []byte{0x10, funcDeep}))
			ctx := context.Background()
			in, err := m.NewInstance(ctx, attackPages)
			require.NoError(t, err)
			defer in.Close(ctx)
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err = in.Call(dctx, "attack", nil)
			require.ErrorIs(t, err, hosterr.ErrTrap)
			if kind == "interpreter" {
				// Its own bound, 2000 calls, comes first.
				assert.ErrorContains(t, err, "stack overflow")
				return
			}
			assert.ErrorContains(t, err, fmt.Sprintf("calls nested deeper than %d MiB of stack", instrument.MaxDepth*instrument.StackUnit>>20))
		})
	}
}

// FuzzDeadlineBound generates loops of gadget mixes and holds each to the
// bound. go test runs the seeds; make fuzz explores.
func FuzzDeadlineBound(f *testing.F) {
	f.Add([]byte{0, 1, 2})
	f.Add([]byte{6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{3, 3, 3, 4, 4, 5, 5, 11, 11})
	f.Fuzz(func(t *testing.T, mix []byte) {
		if len(mix) == 0 || len(mix) > 40 {
			t.Skip("a mix of 1 to 40 gadgets")
		}
		var body []byte
		var names []string
		for _, b := range mix {
			g := gadgets[int(b)%len(gadgets)]
			body, names = append(body, g.code...), append(names, g.name)
		}
		mixName := strings.Join(names, ", ")
		for _, kind := range engineKinds {
			late, gc := withinBound(t, compileAttack(t, kind, body), 60*time.Millisecond)
			assert.LessOrEqual(t, late, boundLate, "late on the %s: %s", kind, mixName)
			assert.LessOrEqual(t, gc, boundLate, "collection on the %s: %s", kind, mixName)
		}
	})
}

// hostCallModule returns a module that imports "reset" and "alloc" of the
// kernel and "random_get" of WASI, and whose export "attack" grows its
// memory to the limit, then runs body in a loop for ever. Its table holds
// alloc, for call_indirect.
func hostCallModule(body []byte) []byte {
	out := slices.Clone(wasmbin.Header)
	// Types: () -> (), (i64) -> (i64), (i32 i32) -> (i32), (i32 i32 i32 i32) -> (i32).
	out = section(out, wasmbin.SectionType, []byte{4, 0x60, 0, 0, 0x60, 1, 0x7e, 1, 0x7e, 0x60, 2, 0x7f, 0x7f, 1, 0x7f,
		0x60, 4, 0x7f, 0x7f, 0x7f, 0x7f, 1, 0x7f})
	imports := []byte{4}
	for _, im := range []struct {
		module, name string
		typ          byte
	}{{kernelModule, "reset", 0}, {kernelModule, "alloc", 1}, {"wasi_snapshot_preview1", "random_get", 2},
		{"wasi_snapshot_preview1", "fd_write", 3}} {
		imports = wasmbin.AppendName(wasmbin.AppendName(imports, im.module), im.name)
		imports = append(imports, 0x00, im.typ)
	}
	out = section(out, wasmbin.SectionImport, imports)
	out = section(out, wasmbin.SectionFunction, []byte{1, 0})
	out = section(out, wasmbin.SectionTable, []byte{1, 0x70, 0x00, 1})
	out = section(out, wasmbin.SectionMemory, []byte{1, 0x00, 1})
	exports := wasmbin.AppendName([]byte{2}, "attack")
	exports = append(exports, 0x00, hostCallAttack)
	exports = append(wasmbin.AppendName(exports, "memory"), 0x02, 0)
	out = section(out, wasmbin.SectionExport, exports)
	out = section(out, wasmbin.SectionElement, []byte{1, 0x00, 0x41, 0x00, 0x0b, 1, hostCallAlloc})
	attack := cat([]byte{1, 1, 0x7f}, constI32(attackPages-1), []byte{0x40, 0, 0x1a}, // a local i32, memory.grow to the limit
		[]byte{0x03, 0x40}, body, []byte{0x0c, 0x00, 0x0b, 0x0b})
	return section(out, wasmbin.SectionCode, cat([]byte{1}, wasmbin.AppendU32(nil, uint32(len(attack))), attack))
}

// Function indices of hostCallModule.
const (
	hostCallReset     = 0
	hostCallAlloc     = 1
	hostCallRandomGet = 2
	hostCallFdWrite   = 3
	hostCallAttack    = 4
)

// iovecs is the code that writes n WASI iovecs of one byte each from
// address 0, {0, 1}, with local 0 as its counter.
func iovecs(n int32) []byte {
	return cat(constI32(0), []byte{0x21, 0}, // i = 0
		[]byte{0x03, 0x40}, // loop
		[]byte{0x20, 0, 0x42, 0x80, 0x80, 0x80, 0x80, 0x10, 0x37, 0x03, 0}, // i64.store [i] 1<<32
		[]byte{0x20, 0}, constI32(8), []byte{0x6a, 0x22, 0}, // i += 8 (tee)
		constI32(n*8), []byte{0x49, 0x0d, 0, 0x0b}) // br_if loop (i < n*8) end
}

// TestDeadlineHoldsForHostCalls, on the compiler's code and on the
// interpreter's: a function of the host's does work in
// proportion to its operands, in Go, which the guest's charges cannot
// know: the kernel's alloc clears the block it returns (3 ms for 32 MiB),
// WASI's random_get fills its buffer (90 ms for 32 MiB), WASI's fd_write
// writes each of its iovecs (4 million of them). A loop of them,
// called directly or through a table, is held to the bound all the same.
func TestDeadlineHoldsForHostCalls(t *testing.T) {
	// reset, then alloc of the whole kernel memory, dropped.
	alloc := cat([]byte{0x10, hostCallReset, 0x42}, wasmbin.AppendS32(nil, attackMemory-(1<<16)))
	tests := []struct {
		name string
		body []byte
	}{
		{"kernel alloc", cat(alloc, []byte{0x10, hostCallAlloc, 0x1a})},
		{"kernel alloc through the table", cat(alloc, constI32(0), []byte{0x11, 1, 0, 0x1a})},
		{"WASI random_get", cat(constI32(0), constI32(attackMemory), []byte{0x10, hostCallRandomGet, 0x1a})},
		// Four million one-byte writes to stderr in one call.
		{"WASI fd_write", cat(iovecs(attackMemory/8-1), constI32(2), constI32(0), constI32(attackMemory/8-1), constI32(0),
			[]byte{0x10, hostCallFdWrite, 0x1a})},
	}
	for _, kind := range engineKinds {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				m := compileOn(t, kind, hostCallModule(tt.body), attackPages)
				require.True(t, m.code().interruptible, "the attack is compiled rewritten")
				late, gc := withinBound(t, m, 200*time.Millisecond)
				assert.LessOrEqual(t, late, boundLate, "how late after its deadline the call ended")
				assert.LessOrEqual(t, gc, boundLate, "how long a collection waited")
			})
		}
	}
}
