// Package bulk copies and compares byte slices of any length in steps the
// Go runtime can stop a goroutine between.
//
// copy and bytes.Equal run in the runtime's assembly, where a goroutine
// cannot be preempted. A garbage collection that starts while a goroutine
// copies a 54 MB state waits for that copy to end before it can scan the
// goroutine's stack, and it waits by spinning on another core and
// signalling the copying thread again and again. In steps, the goroutine
// reaches a call, where it can be stopped, every few microseconds
// (RATIONALE: "Why does the host copy and compare a state in steps?").
package bulk

import (
	"bytes"
	"unsafe"
)

// step is the most bytes one copy or compare covers without a point where
// the goroutine can be stopped: a few tens of microseconds of memory
// bandwidth, and a call every step costs nothing measurable.
const step = 256 << 10

// Copy is the built-in copy: it copies min(len(dst), len(src)) bytes,
// correctly when the two overlap, and returns that count.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n <= step {
		return copy(dst, src)
	}
	dst, src = dst[:n], src[:n]
	if uintptr(unsafe.Pointer(unsafe.SliceData(dst))) > uintptr(unsafe.Pointer(unsafe.SliceData(src))) {
		// dst may start inside src: the last step first, so that no
		// step writes over source bytes a later step still reads.
		for end := n; end > 0; end -= step {
			start := max(end-step, 0)
			copyStep(dst[start:end], src[start:end])
		}
		return n
	}
	for start := 0; start < n; start += step {
		end := min(start+step, n)
		copyStep(dst[start:end], src[start:end])
	}
	return n
}

// Clone returns a copy of b in new memory (nil for nil, as bytes.Clone).
func Clone(b []byte) []byte {
	if len(b) <= step {
		return bytes.Clone(b)
	}
	out := make([]byte, len(b))
	Copy(out, b)
	return out
}

// Append is append(dst, src...). A new array grows by a quarter, as
// append grows a large one, so a run of appends copies each byte a few
// times at most.
func Append(dst, src []byte) []byte {
	if len(src) <= step {
		return append(dst, src...)
	}
	n := len(dst)
	if n+len(src) > cap(dst) {
		grown := make([]byte, n, max(n+len(src), cap(dst)+cap(dst)/4))
		Copy(grown, dst)
		dst = grown
	}
	dst = dst[:n+len(src)]
	Copy(dst[n:], src)
	return dst
}

// Clear sets every byte of b to zero, as clear does.
func Clear(b []byte) {
	for start := 0; start < len(b); start += step {
		clearStep(b[start:min(start+step, len(b))])
	}
}

// Equal is bytes.Equal.
func Equal(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for start := 0; start < len(a); start += step {
		end := min(start+step, len(a))
		if !equalStep(a[start:end], b[start:end]) {
			return false
		}
	}
	return true
}

// copyStep and equalStep are calls, never inlined, so that a goroutine
// asked to stop stops in the prologue of the next one.
//
//go:noinline
func copyStep(dst, src []byte) { copy(dst, src) }

//go:noinline
func clearStep(b []byte) { clear(b) }

//go:noinline
func equalStep(a, b []byte) bool { return bytes.Equal(a, b) }
