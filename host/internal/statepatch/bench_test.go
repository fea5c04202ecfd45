package statepatch

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

// message returns a message of about 500 bytes, the size the turn
// benchmarks assume.
func message(i int) json.RawMessage {
	text := strings.Repeat(fmt.Sprintf("word%d ", i%10), 70)[:400]
	return json.RawMessage(fmt.Sprintf(`{"role":"user","contents":[{"type":"text","text":%q}],"message_id":"m-%06d","created_at":"2025-01-02T03:04:05Z"}`, text, i))
}

func history(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(message(i))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// storePatch is what a store of one turn returns: the request message and
// two response messages appended.
func storePatch() []abi.PatchOp {
	return []abi.PatchOp{
		{Op: abi.PatchAdd, Path: "/messages/-", Value: message(1)},
		{Op: abi.PatchAdd, Path: "/messages/-", Value: message(2)},
		{Op: abi.PatchAdd, Path: "/messages/-", Value: message(3)},
	}
}

var sizes = []int{10, 100, 1000}

// BenchmarkAppend is a store's patch applied to an indexed Doc with the
// state schema checked, the steady state of a Doc kept in a Cache. Its cost
// must not grow with the history.
func BenchmarkAppend(b *testing.B) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	require.NoError(b, err)
	patch := storePatch()
	for _, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			pristine, err := Parse(history(n))
			require.NoError(b, err)
			fresh := func() *Doc {
				d := pristine.Clone()
				if err := d.Apply(patch, s); err != nil { // index /messages
					b.Fatal(err)
				}
				return d
			}
			d := fresh()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Keep the history near n so every size measures what it says.
				if i%100 == 99 {
					b.StopTimer()
					d = fresh()
					b.StartTimer()
				}
				if err := d.Apply(patch, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendUnchecked is the splice and index update alone, without
// a state schema: the part of an append that is this package's own.
func BenchmarkAppendUnchecked(b *testing.B) {
	patch := storePatch()
	for _, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			pristine, err := Parse(history(n))
			require.NoError(b, err)
			fresh := func() *Doc {
				d := pristine.Clone()
				if _, err := d.Elements("/messages"); err != nil { // index it
					b.Fatal(err)
				}
				return d
			}
			d := fresh()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%100 == 99 {
					b.StopTimer()
					d = fresh()
					b.StartTimer()
				}
				if err := d.Apply(patch, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendViaCache is the host's path: find the Doc by the bytes the
// session holds, apply, put it back.
func BenchmarkAppendViaCache(b *testing.B) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	require.NoError(b, err)
	patch := storePatch()
	for _, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			c := NewCache(8)
			raw := history(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%100 == 99 {
					b.StopTimer()
					raw = history(n)
					b.StartTimer()
				}
				d, err := c.Take(raw)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Apply(patch, s); err != nil {
					b.Fatal(err)
				}
				raw = d.Bytes()
				c.Put(d)
			}
		})
	}
}

// BenchmarkAppendCold is a cache miss: parse and index the state, then
// apply. It grows with the history; it is what a session restored from
// storage pays once.
func BenchmarkAppendCold(b *testing.B) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	require.NoError(b, err)
	patch := storePatch()
	for _, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			raw := history(n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, err := Parse(raw)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Apply(patch, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFullValidation is what the naive design pays per store: decode
// and validate the whole patched state.
func BenchmarkFullValidation(b *testing.B) {
	s, err := schema.Compile(json.RawMessage(stateSchema), "state")
	require.NoError(b, err)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			raw := history(n)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := s.Validate(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkElements is provide's from_state resolution on an indexed Doc.
func BenchmarkElements(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			d, err := Parse(history(n))
			require.NoError(b, err)
			if _, err := d.Elements("/messages"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := d.Elements("/messages"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
