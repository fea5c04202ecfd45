package instrument_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wasmhist/wasmhist/host/internal/instrument"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// The functions of the test module.
var (
	// spin loops for ever.
	spin = wasmtest.Func{Export: "spin", Code: []byte{
		0x03, 0x40, 0x0c, 0x00, 0x0b, // loop br 0 end
	}}
	// spinBlock, spinIf and spinTable loop for ever by a branch from
	// inside a block, a conditional branch and a branch table.
	spinBlock = wasmtest.Func{Export: "spinBlock", Code: []byte{
		0x03, 0x40, 0x02, 0x40, 0x0c, 0x01, 0x0b, 0x0b, // loop block br 1 end end
	}}
	spinIf = wasmtest.Func{Export: "spinIf", Code: []byte{
		0x03, 0x40, 0x41, 0x01, 0x0d, 0x00, 0x0b, // loop i32.const 1 br_if 0 end
	}}
	spinTable = wasmtest.Func{Export: "spinTable", Code: []byte{
		0x03, 0x40, 0x02, 0x40, 0x41, 0x00, // loop block i32.const 0
		0x0e, 0x01, 0x01, 0x00, 0x0b, 0x0b, // br_table [1] 0 end end
	}}
	// fork(n) calls fork(n-1) twice while n > 0: 2^n calls and no loop.
	fork = wasmtest.Func{Export: "fork", Params: []byte{wasmtest.I32}, Code: []byte{
		0x20, 0x00, 0x04, 0x40, // local.get 0  if
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01, // fork(n-1)
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01, // fork(n-1)
		0x0b, // end
	}}
	// forkInLoop is fork inside a loop that no branch targets, which
	// runs once and so gets no check of its own.
	forkInLoop = wasmtest.Func{Export: "forkInLoop", Params: []byte{wasmtest.I32}, Code: []byte{
		0x03, 0x40, 0x20, 0x00, 0x04, 0x40, // loop local.get 0 if
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x06, // forkInLoop(n-1)
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x06, // forkInLoop(n-1)
		0x0b, 0x0b, // end end
	}}
	// sum(n) is n + (n-1) + ... + 1, in a loop inside a block.
	sum = wasmtest.Func{Export: "sum", Params: []byte{wasmtest.I32}, Results: []byte{wasmtest.I64}, Locals: []byte{wasmtest.I64}, Code: []byte{
		0x02, 0x40, 0x03, 0x40, // block loop
		0x20, 0x00, 0x45, 0x0d, 0x01, // br_if 1 (n == 0)
		0x20, 0x01, 0x20, 0x00, 0xad, 0x7c, 0x21, 0x01, // acc += n
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00, // n--
		0x0c, 0x00, 0x0b, 0x0b, // br 0 end end
		0x20, 0x01, // acc
	}}
)

// rebuild re-encodes wasm with each section replaced by what edit returns.
func rebuild(t *testing.T, wasm []byte, edit func(wasmbin.Section) []wasmbin.Section) []byte {
	t.Helper()
	secs, err := wasmbin.Sections(wasm)
	require.NoError(t, err)
	out := slices.Clone(wasmbin.Header)
	for _, s := range secs {
		for _, e := range edit(s) {
			out = append(wasmbin.AppendU32(append(out, e.ID), uint32(len(e.Body))), e.Body...)
		}
	}
	return out
}

func testModule() []byte {
	return wasmtest.Module{Funcs: []wasmtest.Func{spin, fork, sum, spinBlock, spinIf, spinTable, forkInLoop}, Memory: true}.Bytes()
}

// instantiate compiles the rewritten module without the runtime's own
// preemption and returns the instance and its interrupt flag.
func instantiate(t *testing.T, wasm []byte) (api.Module, api.MutableGlobal) {
	t.Helper()
	ctx := context.Background()
	rewritten, err := instrument.Module(wasm)
	require.NoError(t, err)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(false))
	t.Cleanup(func() { rt.Close(ctx) })
	mod, err := rt.Instantiate(ctx, rewritten)
	require.NoError(t, err, "the runtime accepts the rewritten module")
	flag, ok := mod.ExportedGlobal(instrument.InterruptExport).(api.MutableGlobal)
	require.True(t, ok, "the flag is an exported mutable global")
	return mod, flag
}

// interrupted calls export in the background, lets it run for a while,
// with gc checks that the Go runtime can still stop the world (the code
// visits the host), then sets the flag and expects the call to trap.
func interrupted(t *testing.T, gc bool, export string, params ...uint64) {
	mod, flag := instantiate(t, testModule())
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction(export).Call(context.Background(), params...)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("%s returned before the flag was set: %v", export, err)
	default:
	}
	if gc {
		// A guest that never visited the host would block this
		// collection, and the whole test binary with it, until go test
		// times out.
		runtime.GC()
	}
	flag.Set(1)
	select {
	case err := <-done:
		require.Error(t, err)
		assert.ErrorContains(t, err, "unreachable")
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not stop within 10s of the flag", export)
	}
}

// A guest whose rewrite misses a check never stops, and stalls the whole
// process at the next garbage collection, go test's own timeout included.
// So the tests that run guests until the flag stops them run in a child
// process, which the parent kills after a while.

func TestInterruptStopsALoop(t *testing.T) {
	inChild(t, func(t *testing.T) {
		for _, export := range []string{"spin", "spinBlock", "spinIf", "spinTable"} {
			t.Run(export, func(t *testing.T) { interrupted(t, false, export) })
		}
	})
}

// TestInterruptStopsRecursion: calls outside loops that repeat are checked
// themselves.
func TestInterruptStopsRecursion(t *testing.T) {
	inChild(t, func(t *testing.T) {
		interrupted(t, false, "fork", 62)
		interrupted(t, false, "forkInLoop", 62)
	})
}

// TestCollectionDuringGuestCode: the Go runtime stops the world while a
// guest spins or recurses: the guest visits the host.
func TestCollectionDuringGuestCode(t *testing.T) {
	inChild(t, func(t *testing.T) {
		interrupted(t, true, "spin")
		interrupted(t, true, "fork", 62)
	})
}

// inChild runs test in a child process running only the calling test, and
// fails if the child fails or does not end within two minutes.
func inChild(t *testing.T, test func(t *testing.T)) {
	if os.Getenv(childEnv) == t.Name() {
		test(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	require.NoError(t, ctx.Err(), "the child was stalled, and killed:\n%s", out)
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: "+t.Name())
}

const childEnv = "WASMHIST_INSTRUMENT_CHILD"

// TestRewriteKeepsResults: with the flag clear, the code computes what it
// did, across many budgets (and so many visits to the host).
func TestRewriteKeepsResults(t *testing.T) {
	mod, _ := instantiate(t, testModule())
	const n = 20 * instrument.Budget
	res, err := mod.ExportedFunction("sum").Call(context.Background(), n)
	require.NoError(t, err)
	assert.Equal(t, uint64(n*(n+1)/2), res[0])
	_, err = mod.ExportedFunction("fork").Call(context.Background(), 16)
	require.NoError(t, err, "2^16 calls complete with the flag clear")
}

func TestCustomSections(t *testing.T) {
	custom := func(name string) wasmtest.Section {
		return wasmtest.Section{ID: 0, Body: append(wasmbin.AppendName(nil, name), 1, 2, 3)}
	}
	m := wasmtest.Module{Funcs: []wasmtest.Func{sum}, Memory: true, Extra: []wasmtest.Section{custom(".debug_info"), custom("producers")}}
	out, err := instrument.Module(m.Bytes())
	require.NoError(t, err)
	secs, err := wasmbin.Sections(out)
	require.NoError(t, err)
	var names []string
	for _, s := range secs {
		if s.ID == 0 {
			names = append(names, (&wasmbin.Reader{B: s.Body}).Name())
		}
	}
	assert.Equal(t, []string{"producers"}, names, "debug information, whose code offsets the rewrite shifts, is dropped")
}

// TestRefusesMalformed: a module the rewrite would turn from invalid into
// valid is refused, above all one that refers to the globals the rewrite
// adds (it could reset its own countdown), but also one that names the
// locals, functions or types it adds.
func TestRefusesMalformed(t *testing.T) {
	resets := sum
	resets.Code = append([]byte{0x41, 0x64, 0x24, 0x00}, sum.Code...) // i32.const 100  global.set 0
	reads := sum
	reads.Code = append([]byte{0x23, 0x01, 0x1a}, sum.Code...) // global.get 1  drop
	dataOffset := wasmtest.Section{ID: 11, Body: []byte{1, 0x00, 0x23, 0x00, 0x0b, 0x00}}
	withFuncs := func(extra ...wasmtest.Section) wasmtest.Module {
		return wasmtest.Module{Funcs: []wasmtest.Func{sum}, Memory: true, Extra: extra}
	}
	exportsGlobal := withFuncs()
	exportsGlobal.Exports = []wasmtest.Export{{Name: "g", Kind: 0x03, Index: 0}}
	// A byte after the last function of the code section, or after the
	// entries of the export section.
	appendTo := func(id, b byte) func(wasmbin.Section) []wasmbin.Section {
		return func(s wasmbin.Section) []wasmbin.Section {
			if s.ID == id {
				s.Body = append(slices.Clone(s.Body), b)
			}
			return []wasmbin.Section{s}
		}
	}
	trailing := rebuild(t, testModule(), appendTo(wasmbin.SectionCode, 0x01))
	// The rewrite adds locals to a function that calls or has a memory
	// bulk instruction, and a function and types for a bulk instruction.
	fill := []byte{0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 11, 0} // memory.fill of 0 bytes at 0
	alone := func(code []byte) wasmtest.Module {
		return wasmtest.Module{Funcs: []wasmtest.Func{{Code: code}}, Memory: true}
	}
	exportsHelper := alone(fill)
	exportsHelper.Exports = []wasmtest.Export{{Name: "h", Kind: 0x00, Index: 1}}
	indirect := alone(slices.Concat([]byte{0x41, 0, 0x41, 0, 0x41, 0, 0x41, 0, 0x11, 0x01, 0x00}, fill)) // call_indirect (type 1)
	indirect.Table = []byte{1, 0x70, 0x00, 0x01}
	invalid := map[string][]byte{
		"local.get of a local it lacks":    alone([]byte{0x20, 0x00, 0x1a, 0x10, 0x00}).Bytes(),
		"local.set of a local it lacks":    alone(append([]byte{0x41, 0x05, 0x21, 0x00}, fill...)).Bytes(),
		"call of a function it lacks":      alone(slices.Concat([]byte{0x41, 0, 0x41, 0, 0x41, 0, 0x10, 0x01}, fill)).Bytes(),
		"export of a function it lacks":    exportsHelper.Bytes(),
		"block of a type it lacks":         alone(slices.Concat([]byte{0x41, 0, 0x41, 0, 0x41, 0, 0x02, 0x01, 0x1a, 0x1a, 0x1a, 0x0b}, fill)).Bytes(),
		"call_indirect of a type it lacks": indirect.Bytes(),
	}
	junk := rebuild(t, testModule(), appendTo(wasmbin.SectionExport, 0x13))
	tests := map[string][]byte{
		"bytes after the exports":            junk,
		"global.set of a global it lacks":    wasmtest.Module{Funcs: []wasmtest.Func{resets}, Memory: true}.Bytes(),
		"global.get of a global it lacks":    wasmtest.Module{Funcs: []wasmtest.Func{reads}, Memory: true}.Bytes(),
		"data offset from a global it lacks": withFuncs(dataOffset).Bytes(),
		"export of a global it lacks":        exportsGlobal.Bytes(),
		"sections out of order":              withFuncs(wasmtest.Section{ID: 1, Body: []byte{0}}).Bytes(),
		"bytes after the last function":      trailing,
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	for name, wasm := range invalid {
		_, err := rt.CompileModule(ctx, wasm)
		require.Error(t, err, "%s: the runtime refuses the module as it is", name)
		tests[name] = wasm
	}
	for name, wasm := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := instrument.Module(wasm)
			require.ErrorIs(t, err, wasmbin.ErrMalformed)
		})
	}
}

// TestStraightCodeIsChecked: a long run of code without loops or calls
// gets checks every so often, so that a loop calling it many times cannot
// stretch the time between two checks.
func TestStraightCodeIsChecked(t *testing.T) {
	long := wasmtest.Func{Export: "long", Code: bytes.Repeat([]byte{0x01}, 5000)} // nop
	out, err := instrument.Module(wasmtest.Module{Funcs: []wasmtest.Func{long}, Memory: true}.Bytes())
	require.NoError(t, err)
	visits := bytes.Count(out, []byte{0x41, 0x00, 0x40, 0x00, 0x1a}) // i32.const 0  memory.grow 0  drop
	assert.GreaterOrEqual(t, visits, 4, "checks in 5000 bytes of straight code")
	// A function that returns without a check is charged to its caller,
	// at most leafUnits (128); a longer one checks before it returns.
	for n, want := range map[int]int{100: 0, 500: 1} {
		short := wasmtest.Func{Export: "short", Code: bytes.Repeat([]byte{0x01}, n)}
		out, err = instrument.Module(wasmtest.Module{Funcs: []wasmtest.Func{short}, Memory: true}.Bytes())
		require.NoError(t, err)
		assert.Equal(t, want, bytes.Count(out, []byte{0x41, 0x00, 0x40, 0x00, 0x1a}), "checks in %d bytes without loops or calls", n)
	}
}

// TestForwardBranchesDoNotSkipChecks: a check placed by position in
// straight code must be on every path, not on code a branch jumps over.
// long runs 100 blocks of 1018 bytes each left by a branch over one last
// instruction, and counts its calls in memory; a loop calls it. With the
// flag set first, the guest must stop within a few calls: with one check
// per call (the loop's), it would take about a budget of them.
func TestForwardBranchesDoNotSkipChecks(t *testing.T) {
	code := []byte{0x41, 0x00, 0x41, 0x00, 0x28, 0x02, 0x00, 0x41, 0x01, 0x6a, 0x36, 0x02, 0x00} // mem[0]++
	for range 100 {
		code = append(code, 0x02, 0x40)                          // block
		code = append(code, bytes.Repeat([]byte{0x01}, 1018)...) // nop...
		code = append(code, 0x0c, 0x00, 0x01, 0x0b)              // br 0  nop  end
	}
	long := wasmtest.Func{Code: code}
	caller := wasmtest.Func{Export: "caller", Code: []byte{0x03, 0x40, 0x10, 0x00, 0x0c, 0x00, 0x0b}} // loop call 0 br 0 end
	inChild(t, func(t *testing.T) {
		mod, flag := instantiate(t, wasmtest.Module{Funcs: []wasmtest.Func{long, caller}, Memory: true}.Bytes())
		flag.Set(1)
		done := make(chan error, 1)
		go func() {
			_, err := mod.ExportedFunction("caller").Call(context.Background())
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorContains(t, err, "unreachable")
		case <-time.After(20 * time.Second):
			t.Fatal("the guest did not stop")
		}
		calls, ok := mod.Memory().ReadUint32Le(0)
		require.True(t, ok)
		assert.Less(t, calls, uint32(64), "calls of long before the flag was seen")
	})
}

// TestStartFunctionIsNotRewritten: a start function runs while the module
// is instantiated, before the host holds its flag, so such a module is
// left to the runtime's own preemption.
func TestStartFunctionIsNotRewritten(t *testing.T) {
	m := wasmtest.Module{Funcs: []wasmtest.Func{sum, {Code: []byte{0x01}}}, Memory: true}
	withStart := rebuild(t, m.Bytes(), func(s wasmbin.Section) []wasmbin.Section {
		if s.ID == wasmbin.SectionCode {
			return []wasmbin.Section{{ID: 8, Body: []byte{1}}, s} // start: function 1
		}
		return []wasmbin.Section{s}
	})
	_, err := instrument.Module(withStart)
	require.ErrorIs(t, err, instrument.ErrUnsupported)
}

func TestUnsupported(t *testing.T) {
	simd := sum
	simd.Code = []byte{0xfd, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 0x42, 0x00} // v128.const; drop; i64.const 0
	own := sum
	own.Export = instrument.InterruptExport
	tests := []struct {
		name string
		wasm []byte
		want error
	}{
		{"no memory", wasmtest.Module{Funcs: []wasmtest.Func{sum}}.Bytes(), instrument.ErrUnsupported},
		{"SIMD", wasmtest.Module{Funcs: []wasmtest.Func{simd}, Memory: true}.Bytes(), instrument.ErrUnsupported},
		{"exports the flag's name", wasmtest.Module{Funcs: []wasmtest.Func{own}, Memory: true}.Bytes(), instrument.ErrUnsupported},
		{"not wasm", []byte("#!/bin/sh"), wasmbin.ErrMalformed},
		{"truncated", testModule()[:len(testModule())-3], wasmbin.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := instrument.Module(tt.wasm)
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// BenchmarkModule rewrites the in-memory plugin, as every load does.
func BenchmarkModule(b *testing.B) {
	wasm, err := os.ReadFile(sdktest.BuildPlugin(b, "github.com/wasmhist/wasmhist/plugins/inmemory"))
	require.NoError(b, err)
	b.SetBytes(int64(len(wasm)))
	for b.Loop() {
		if _, err := instrument.Module(wasm); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzModule: the rewrite never turns a module the runtime refuses into
// one it accepts.
func FuzzModule(f *testing.F) {
	f.Add(testModule())
	f.Add(wasmtest.Module{Funcs: []wasmtest.Func{sum}}.Bytes())
	f.Add(wasmtest.Module{Funcs: []wasmtest.Func{spinTable, forkInLoop}, Memory: true}.Bytes())
	f.Add(dataModule(dataBody(segment{10, []byte("ab")}, segment{-1, nil}, segment{14, []byte("cd")})))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	valid := func(b []byte) bool {
		m, err := rt.CompileModule(ctx, b)
		if err == nil {
			m.Close(ctx)
		}
		return err == nil
	}
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := instrument.Module(wasm)
		if err != nil {
			return
		}
		if !valid(wasm) {
			assert.False(t, valid(out), "the rewrite made an invalid module valid")
		}
	})
}

// TestFlagReadAfterIndirectCallsThatMayReachTheHost: call_indirect reads
// the flag after it returns only where a table may hold an imported
// function, one named outside code (here in a declarative element
// segment, which lets code take its reference).
func TestFlagReadAfterIndirectCallsThatMayReachTheHost(t *testing.T) {
	build := func(elems []byte) []byte {
		sec := func(out []byte, id byte, body []byte) []byte {
			return append(wasmbin.AppendU32(append(out, id), uint32(len(body))), body...)
		}
		out := slices.Clone(wasmbin.Header)
		out = sec(out, wasmbin.SectionType, []byte{1, 0x60, 0, 0})
		out = sec(out, wasmbin.SectionImport, append(wasmbin.AppendName(wasmbin.AppendName([]byte{1}, "env"), "f"), 0x00, 0))
		out = sec(out, wasmbin.SectionFunction, []byte{1, 0})
		out = sec(out, wasmbin.SectionTable, []byte{1, 0x70, 0x00, 1})
		out = sec(out, wasmbin.SectionMemory, []byte{1, 0x00, 1})
		if elems != nil {
			out = sec(out, wasmbin.SectionElement, elems)
		}
		// i32.const 0  call_indirect type 0 table 0
		code := []byte{0, 0x41, 0, 0x11, 0, 0, 0x0b}
		return sec(out, wasmbin.SectionCode, append([]byte{1, byte(len(code))}, code...))
	}
	// global.get $flag (global 1: the module has none of its own)  if  unreachable  end
	read := []byte{0x23, 0x01, 0x04, 0x40, 0x00, 0x0b}
	reads := func(wasm []byte) int {
		out, err := instrument.Module(wasm)
		require.NoError(t, err)
		return bytes.Count(out, read)
	}
	// A declarative segment naming the import: flags 3, elemkind 0, one index.
	named, plain := reads(build([]byte{1, 0x03, 0x00, 1, 0})), reads(build(nil))
	assert.Equal(t, plain+1, named, "a flag read after the call_indirect only where the import is named")
}
