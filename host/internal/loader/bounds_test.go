package loader

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin/wasmtest"
)

// huge is a count of four billion, as LEB128.
var huge = []byte{0xff, 0xff, 0xff, 0xff, 0x0f}

// wasmOf is a header and the sections given, in order, as they are.
func wasmOf(secs ...wasmtest.Section) []byte {
	out := slices.Clone(wasmbin.Header)
	for _, s := range secs {
		out = append(wasmbin.AppendU32(append(out, s.ID), uint32(len(s.Body))), s.Body...)
	}
	return out
}

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

func u32(v uint32) []byte { return wasmbin.AppendU32(nil, v) }

// funcType is the type section of one type () -> ().
var funcType = wasmtest.Section{ID: 1, Body: []byte{1, 0x60, 0, 0}}

// code is a code section of functions, each with its local groups (count,
// i32) and an empty body.
func code(locals ...[]uint32) wasmtest.Section {
	b := u32(uint32(len(locals)))
	for _, groups := range locals {
		f := u32(uint32(len(groups)))
		for _, n := range groups {
			f = append(f, append(u32(n), 0x7f)...)
		}
		f = append(f, 0x0b)
		b = append(b, append(u32(uint32(len(f))), f...)...)
	}
	return wasmtest.Section{ID: 10, Body: b}
}

// functions is a function section of n functions of type 0.
func functions(n int) wasmtest.Section {
	return wasmtest.Section{ID: 3, Body: append(u32(uint32(n)), make([]byte, n)...)}
}

// TestBoundsRefuseCountsPastTheirBytes: a count or size larger than the
// bytes after it is refused wherever the runtime would allocate for it
// first. Without the check, the first case kills the process.
func TestBoundsRefuseCountsPastTheirBytes(t *testing.T) {
	const i32 = 0x41
	tests := map[string]struct {
		wasm    []byte
		section byte
	}{
		"types":                         {wasmOf(wasmtest.Section{ID: 1, Body: huge}), 1},
		"parameters":                    {wasmOf(wasmtest.Section{ID: 1, Body: cat([]byte{1, 0x60}, huge)}), 1},
		"results":                       {wasmOf(wasmtest.Section{ID: 1, Body: cat([]byte{1, 0x60, 0}, huge)}), 1},
		"imports":                       {wasmOf(wasmtest.Section{ID: 2, Body: huge}), 2},
		"an import's name":              {wasmOf(wasmtest.Section{ID: 2, Body: cat([]byte{1, 1, 'm'}, huge)}), 2},
		"functions":                     {wasmOf(funcType, wasmtest.Section{ID: 3, Body: huge}), 3},
		"tables":                        {wasmOf(wasmtest.Section{ID: 4, Body: huge}), 4},
		"memories":                      {wasmOf(wasmtest.Section{ID: 5, Body: huge}), 5},
		"globals":                       {wasmOf(wasmtest.Section{ID: 6, Body: huge}), 6},
		"exports":                       {wasmOf(wasmtest.Section{ID: 7, Body: huge}), 7},
		"an export's name":              {wasmOf(wasmtest.Section{ID: 7, Body: cat([]byte{1}, huge)}), 7},
		"element segments":              {wasmOf(wasmtest.Section{ID: 9, Body: huge}), 9},
		"an element's function indexes": {wasmOf(wasmtest.Section{ID: 9, Body: cat([]byte{1, 0, i32, 0, 0x0b}, huge)}), 9},
		"an element's expressions":      {wasmOf(wasmtest.Section{ID: 9, Body: cat([]byte{1, 5, 0x70}, huge)}), 9},
		"functions' code":               {wasmOf(funcType, functions(1), wasmtest.Section{ID: 10, Body: huge}), 10},
		"a function's size":             {wasmOf(funcType, functions(1), wasmtest.Section{ID: 10, Body: cat([]byte{1}, huge)}), 10},
		"a function's local groups":     {wasmOf(funcType, functions(1), wasmtest.Section{ID: 10, Body: cat([]byte{1, 6}, huge, []byte{0x0b})}), 10},
		"data segments":                 {wasmOf(wasmtest.Section{ID: 11, Body: huge}), 11},
		"a data segment's size":         {wasmOf(wasmtest.Section{ID: 11, Body: cat([]byte{1, 0, i32, 0, 0x0b}, huge)}), 11},
		"a passive segment's size":      {wasmOf(wasmtest.Section{ID: 11, Body: cat([]byte{1, 1}, huge)}), 11},
		"function names": {wasmOf(wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"),
			[]byte{1, 5}, huge)}), 0},
		"local names": {wasmOf(wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"),
			[]byte{2, 5}, huge)}), 0},
		"one function's local names": {wasmOf(wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"),
			[]byte{2, 7, 1, 0}, huge)}), 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ReadSections(tt.wasm)
			require.ErrorIs(t, err, errBounds)
			require.ErrorIs(t, err, wasmbin.ErrMalformed)
			assert.ErrorContains(t, err, fmt.Sprintf("section %d:", tt.section))
			assert.ErrorContains(t, err, "4294967295")
			assert.ErrorContains(t, err, "damaged")
		})
	}
}

// TestBoundsNameSubsectionsTakeTheirSize: the runtime decodes a name
// subsection by its content and moves on by its declared size; one that
// declares less than it holds would have it read the next section as more
// names (here a map of four billion function names, which kills the
// process), so it is refused, as is one that declares more.
func TestBoundsNameSubsectionsTakeTheirSize(t *testing.T) {
	names := func(sub ...byte) wasmtest.Section {
		return wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"), sub)}
	}
	next := wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "x"), []byte{1, 5}, huge)}
	for name, tt := range map[string]struct {
		wasm []byte
		want string
	}{
		"declares less": {wasmOf(names(0, 0, 1, 'a'), next), "name subsection 0 declares 0 bytes and holds 2"},
		"declares more": {wasmOf(names(1, 6, 1, 0, 1, 'f', 0xaa), next), "name subsection 1 declares 6 bytes and holds 4"},
		// Declaring 2 bytes more than it holds, followed by a subsection
		// those 2 bytes cover: the runtime's count of what is left wraps
		// around, and it reads the next section as names.
		"declares more, then ends": {wasmOf(names(1, 6, 1, 0, 1, 'f', 9, 2, 'x', 'x'), next), "name subsection 1 declares 6 bytes and holds 4"},
		"local names, less":        {wasmOf(names(2, 1, 1, 0, 1, 0, 1, 'x'), next), "name subsection 2 declares 1 bytes and holds 6"},
		"an unknown one, more":     {wasmOf(names(9, 3, 0xaa, 0xbb)), "unexpected end"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadSections(tt.wasm)
			require.ErrorIs(t, err, wasmbin.ErrMalformed)
			assert.ErrorContains(t, err, tt.want)
		})
	}
	_, err := ReadSections(wasmOf(names(0, 2, 1, 'a', 1, 4, 1, 0, 1, 'f'), next))
	require.NoError(t, err, "subsections of their declared sizes, then another section")
}

// TestBoundsOnLocals: a function may declare MaxFunctionLocals locals, the
// functions together MaxLocalsPerCodeByte per byte of code, and no more.
func TestBoundsOnLocals(t *testing.T) {
	accepted := wasmOf(funcType, functions(1), code([]uint32{MaxFunctionLocals - 1, 1}))
	_, err := ReadSections(accepted)
	require.NoError(t, err, "exactly the most locals a function may have")

	_, err = ReadSections(wasmOf(funcType, functions(1), code([]uint32{MaxFunctionLocals, 1})))
	require.ErrorIs(t, err, ErrTooManyLocals)
	assert.ErrorContains(t, err, "function 0 declares 50001 locals")
	assert.ErrorContains(t, err, "split the function")

	// Two functions of 30,000 locals each, in a few bytes of code.
	_, err = ReadSections(wasmOf(funcType, functions(2), code([]uint32{30_000}, []uint32{30_000})))
	require.ErrorIs(t, err, ErrTooManyLocals)
	assert.ErrorContains(t, err, "more than 50000 locals")

	// The same in a code section large enough for them.
	big := padded(code([]uint32{30_000}, []uint32{30_000}), 60_000/MaxLocalsPerCodeByte)
	_, err = ReadSections(wasmOf(funcType, functions(2), big))
	require.NoError(t, err, "%d locals in %d bytes of code", 60_000, 60_000/MaxLocalsPerCodeByte)
}

// padded makes the first function of a code section end with n bytes of
// nop, so that the section is larger.
func padded(s wasmtest.Section, n int) wasmtest.Section {
	r := &wasmbin.Reader{B: s.Body}
	count := r.U32()
	size := int(r.U32())
	first := slices.Clone(r.B[r.Off : r.Off+size])
	rest := r.B[r.Off+size:]
	first = append(first[:len(first)-1], append(bytes.Repeat([]byte{0x01}, n), 0x0b)...) // nop

	b := cat(u32(count), u32(uint32(len(first))), first, rest)
	return wasmtest.Section{ID: 10, Body: b}
}

// TestBoundsAcceptWhatFits: entries that fill their section exactly, of
// every kind the walk reads, are accepted, and so is every form of element
// and data segment and of constant expression.
func TestBoundsAcceptWhatFits(t *testing.T) {
	m := wasmtest.Module{
		Funcs:  []wasmtest.Func{{Export: "f", Params: []byte{wasmtest.I32, wasmtest.I64}, Results: []byte{wasmtest.I32}, Locals: []byte{wasmtest.I32}, Code: []byte{0x20, 0x02}}},
		Memory: true,
		Extra: []wasmtest.Section{
			{ID: 11, Body: cat([]byte{3},
				[]byte{0, 0x41, 0x80, 0x01, 0x0b, 2, 'a', 'b'}, // active, i32.const 128
				[]byte{1, 1, 'p'},                // passive
				[]byte{2, 0, 0x41, 0, 0x0b, 0})}, // memory 0 given, empty
			{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"),
				[]byte{0, 2}, wasmbin.AppendName(nil, "m"),
				[]byte{1, 4, 1, 0}, wasmbin.AppendName(nil, "f"),
				[]byte{2, 6, 1, 0, 1, 2}, wasmbin.AppendName(nil, "x"),
				[]byte{9, 2, 0xaa, 0xbb})}, // an unknown subsection, skipped
			{ID: 0, Body: cat(wasmbin.AppendName(nil, "other"), []byte{1, 2, 3})},
		},
	}
	_, err := ReadSections(m.Bytes())
	require.NoError(t, err)
	require.NoError(t, compiles(t, m.Bytes()), "the runtime accepts the module too")

	elements := wasmtest.Section{ID: 9, Body: cat([]byte{8},
		[]byte{0, 0x41, 0, 0x0b, 1, 0},             // active, function indexes
		[]byte{1, 0, 2, 0, 0},                      // passive, function indexes
		[]byte{2, 0, 0x41, 0, 0x0b, 0, 1, 0},       // table 0 given
		[]byte{3, 0, 1, 0},                         // declarative
		[]byte{4, 0x41, 0, 0x0b, 1, 0xd2, 0, 0x0b}, // active, ref.func
		[]byte{5, 0x70, 1, 0xd0, 0x70, 0x0b},       // passive, ref.null
		[]byte{6, 0, 0x41, 0, 0x0b, 0x70, 0},       // table 0 given, no expressions
		[]byte{7, 0x70, 0})}                        // declarative, no expressions
	_, err = ReadSections(wasmOf(funcType, functions(1), wasmtest.Section{ID: 4, Body: []byte{1, 0x70, 0, 4}}, elements, code(nil)))
	require.NoError(t, err, "every form of element segment")

	globals := wasmtest.Section{ID: 6, Body: cat([]byte{5},
		[]byte{0x7f, 0, 0x41, 0x7f, 0x0b},
		[]byte{0x7e, 0, 0x42, 0x80, 0x7f, 0x0b},
		[]byte{0x7d, 0, 0x43, 0, 0, 0, 0, 0x0b},
		[]byte{0x7c, 0, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b},
		[]byte{0x7b, 0, 0xfd, 0x0c}, make([]byte, 16), []byte{0x0b})}
	_, err = ReadSections(wasmOf(globals))
	require.NoError(t, err, "every constant the runtime accepts in a global")
}

// compiles is the runtime's verdict on wasm.
func compiles(t *testing.T, wasm []byte) error {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	m, err := rt.CompileModule(ctx, wasm)
	if err == nil {
		m.Close(ctx)
	}
	return err
}

// FuzzBoundsKeepDecodingSmall: a module the bounds accept costs the runtime
// an allocation in proportion to its size to decode, whatever it declares.
func FuzzBoundsKeepDecodingSmall(f *testing.F) {
	f.Add(wasmOf(funcType, functions(1), code([]uint32{3, 4})))
	f.Add(wasmOf(wasmtest.Section{ID: 11, Body: []byte{1, 0, 0x41, 0, 0x0b, 2, 'a', 'b'}}))
	f.Add(wasmOf(wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"), []byte{1, 4, 1, 0, 1, 'f'})}))
	f.Add(wasmOf(wasmtest.Section{ID: 1, Body: []byte{2, 0x60, 1, 0x7f, 0, 0x60, 0, 1, 0x7e}}))
	f.Add(wasmOf(wasmtest.Section{ID: 9, Body: []byte{1, 0, 0x41, 0, 0x0b, 2, 0, 0}}))
	f.Add(wasmOf(wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"), []byte{1, 6, 1, 0, 1, 'f', 9, 2, 'x', 'x'})},
		wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "x"), []byte{1, 5, 0x80, 0x80, 0x80, 0x02, 0})}))
	f.Add(wasmOf(wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "name"), []byte{0, 2, 1, 'a'})},
		wasmtest.Section{ID: 0, Body: cat(wasmbin.AppendName(nil, "x"), []byte{1, 5, 0xff, 0xff, 0xff, 0x0f, 0})}))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		if _, err := ReadSections(wasm); err != nil {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_ = compiles(t, wasm) // only its cost matters
		runtime.ReadMemStats(&after)
		limit := uint64(64<<20 + 1024*len(wasm))
		assert.LessOrEqual(t, after.TotalAlloc-before.TotalAlloc, limit, "allocated to decode and compile %d bytes", len(wasm))
	})
}
