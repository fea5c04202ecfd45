package instrument

import (
	"cmp"
	"slices"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// maxDataGap is the longest run of zero bytes coalesceData writes out to
// join two data segments.
const maxDataGap = 64

// dataSegment is an active data segment of memory 0 at a constant offset.
type dataSegment struct {
	off  uint32
	init []byte
}

// coalesceData joins the data segments of a data section body where at
// most maxDataGap bytes lie between two of them, writing the zeros between
// them out, and returns the new body; or body itself when it holds anything
// but non-overlapping active segments of memory 0 at i32.const offsets.
//
// The Go linker splits a module's data at every run of zeros, into tens of
// thousands of segments of a few bytes each (31,860 in the in-memory
// plugin, half of them 2 bytes long, with 18-24 bytes between them), and
// the runtime decodes, keeps and copies each of them on every load and
// every instance (RATIONALE: "Why does the rewrite join data segments?").
//
// The result initialises the memory as the segments did, provided the
// caller has checked that the memory is the module's own (so zero where
// no segment writes when the segments are applied) and that there is no
// data count section (without one, no instruction can refer to a segment
// by index, and the validator refuses memory.init and data.drop). An
// instance whose segments do not fit its memory still fails: the joined
// segment ends where the last of its segments did.
func coalesceData(body []byte) []byte {
	r := &wasmbin.Reader{B: body}
	n := r.U32()
	if r.Err != nil || n < 2 || uint64(n) > uint64(len(body)) {
		return body
	}
	segs := make([]dataSegment, 0, n)
	for range n {
		// flags 0 (active, memory 0), i32.const off, end
		if r.U32() != 0 || r.Byte() != 0x41 {
			return body
		}
		off := r.S32()
		if r.Byte() != 0x0b {
			return body
		}
		size := r.U32()
		if r.Err != nil || uint64(size) > uint64(len(body)-r.Off) {
			return body
		}
		segs = append(segs, dataSegment{off: uint32(off), init: body[r.Off : r.Off+int(size)]})
		r.Off += int(size)
	}
	if r.Off != len(body) {
		return body
	}
	slices.SortStableFunc(segs, func(a, b dataSegment) int { return cmp.Compare(a.off, b.off) })
	for i, s := range segs {
		if end(s) > 1<<32 || i > 0 && end(segs[i-1]) > uint64(s.off) {
			// Overlapping (the order in which they apply matters), or
			// past any memory.
			return body
		}
	}

	// The joined segments, from segs[i] to segs[j-1], of size bytes; the
	// body is written once, into a buffer of its size.
	type group struct {
		i, j int
		size uint64
	}
	var groups []group
	total := 0
	for i := 0; i < len(segs); {
		j, size := i+1, uint64(len(segs[i].init))
		for j < len(segs) && uint64(segs[j].off)-end(segs[j-1]) <= maxDataGap {
			size = end(segs[j]) - uint64(segs[i].off)
			j++
		}
		groups = append(groups, group{i, j, size})
		total += 3 + len(wasmbin.AppendS32(nil, int32(segs[i].off))) + len(wasmbin.AppendU32(nil, uint32(size))) + int(size)
		i = j
	}
	count := wasmbin.AppendU32(nil, uint32(len(groups)))
	out := append(make([]byte, 0, len(count)+total), count...)
	for _, g := range groups {
		out = append(out, 0x00, 0x41)
		out = wasmbin.AppendS32(out, int32(segs[g.i].off))
		out = append(out, 0x0b)
		out = wasmbin.AppendU32(out, uint32(g.size))
		at := end(segs[g.i]) // where the joined bytes written so far end
		out = append(out, segs[g.i].init...)
		for _, s := range segs[g.i+1 : g.j] {
			out = append(out, make([]byte, int(uint64(s.off)-at))...)
			out = append(out, s.init...)
			at = end(s)
		}
	}
	return out
}

// end is where s ends in memory.
func end(s dataSegment) uint64 { return uint64(s.off) + uint64(len(s.init)) }
