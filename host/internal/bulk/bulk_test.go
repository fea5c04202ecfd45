package bulk

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pattern is n bytes that differ from their neighbours, so a step copied
// to the wrong place or not at all shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// TestCopyIsTheBuiltinCopy: at lengths around the step and across it, and
// with the destination before, on or after the source in one buffer, Copy
// leaves the buffer as copy does and returns its count. A forward-only
// loop fails the destination-after-source cases.
func TestCopyIsTheBuiltinCopy(t *testing.T) {
	for _, n := range []int{0, 1, step - 1, step, step + 1, 3*step + 17} {
		for _, shift := range []int{-step - 3, -5, 0, 5, step + 3, 2 * step} {
			buf := pattern(n + 5*step)
			want := slices.Clone(buf)
			src := 2*step + 3
			dst := src + shift
			got := Copy(buf[dst:dst+n], buf[src:src+n])
			assert.Equal(t, copy(want[dst:dst+n], want[src:src+n]), got)
			require.True(t, bytes.Equal(want, buf), "n %d, shift %d", n, shift)
		}
	}
	// Unequal lengths copy the shorter.
	dst := make([]byte, step+10)
	assert.Equal(t, step+10, Copy(dst, pattern(3*step)))
	assert.Equal(t, pattern(step+10), dst)
}

// FuzzCopy: any lengths and any overlap in one buffer, against copy.
func FuzzCopy(f *testing.F) {
	f.Add(uint32(0), uint32(step), uint32(step+1))
	f.Add(uint32(7), uint32(0), uint32(3*step))
	f.Fuzz(func(t *testing.T, dst, src, n uint32) {
		size := 4*step + 64
		d, s, l := int(dst)%size, int(src)%size, int(n)%size
		buf := pattern(size)
		want := slices.Clone(buf)
		got := Copy(buf[d:min(d+l, size)], buf[s:min(s+l, size)])
		require.Equal(t, copy(want[d:min(d+l, size)], want[s:min(s+l, size)]), got)
		require.True(t, bytes.Equal(want, buf), "dst %d, src %d, n %d", d, s, l)
	})
}

// TestEqualIsBytesEqual: a difference in any step, the first byte or the
// last, and unequal lengths are unequal; nil and empty are equal.
func TestEqualIsBytesEqual(t *testing.T) {
	a := pattern(3*step + 9)
	assert.True(t, Equal(a, slices.Clone(a)))
	assert.True(t, Equal(nil, []byte{}))
	assert.False(t, Equal(a, a[:len(a)-1]))
	for _, at := range []int{0, step - 1, step, 2*step + 1, len(a) - 1} {
		b := slices.Clone(a)
		b[at]++
		assert.False(t, Equal(a, b), "differs at %d", at)
		assert.False(t, Equal(b, a), "differs at %d", at)
	}
}

// TestClone: a copy in new memory, nil for nil as bytes.Clone.
func TestClone(t *testing.T) {
	assert.Nil(t, Clone(nil))
	for _, n := range []int{0, 10, 3*step + 1} {
		a := pattern(n)
		c := Clone(a)
		require.Equal(t, a, c)
		if n > 0 {
			c[0]++
			assert.NotEqual(t, a[0], c[0], "the clone shares memory")
		}
	}
}

// TestStoppableInSteps: while one goroutine copies and compares 128 MB
// over and over, a garbage collection, which must stop that goroutine to
// scan its stack, ends in a fraction of one copy. With one uninterruptible
// copy (copy, bytes.Equal) each collection waits for the copy under way to
// end, a whole copy or more (its start, its stack scan and its end each
// wait for one); here the median of seven stays under half the fastest
// copy, which leaves room for a loaded machine. It runs alone, with the
// sandbox's timing bounds (make test).
func TestStoppableInSteps(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two threads: one copies while the other collects")
	}
	src, dst := pattern(128<<20), make([]byte, 128<<20)
	var stop atomic.Bool
	var fastest atomic.Int64
	fastest.Store(int64(time.Hour))
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		close(started)
		for !stop.Load() {
			t0 := time.Now()
			Copy(dst, src)
			if !Equal(dst, src) {
				panic("bulk: copy differs")
			}
			if d := int64(time.Since(t0)); d < fastest.Load() {
				fastest.Store(d)
			}
		}
	})
	<-started
	time.Sleep(50 * time.Millisecond) // under way
	var gcs []time.Duration
	for range 7 {
		t0 := time.Now()
		runtime.GC()
		gcs = append(gcs, time.Since(t0))
	}
	stop.Store(true)
	wg.Wait()
	slices.Sort(gcs)
	copyTime := time.Duration(fastest.Load())
	t.Logf("collections %v; fastest copy and compare %v", gcs, copyTime)
	assert.Less(t, gcs[len(gcs)/2], copyTime/2, "a collection waited for a copy")
}

// TestAppendIsAppend: into room, into a full slice and onto nil, small and
// across steps, the result is what append gives, and dst's bytes stay.
func TestAppendIsAppend(t *testing.T) {
	for _, n := range []int{0, 5, step + 1, 3*step + 2} {
		for _, room := range []int{0, n + 10} {
			dst := make([]byte, 7, 7+room)
			copy(dst, "prefix!")
			src := pattern(n)
			want := append(slices.Clone(dst), src...)
			got := Append(dst, src)
			require.True(t, bytes.Equal(want, got), "n %d, room %d", n, room)
		}
		assert.Equal(t, append([]byte(nil), pattern(n)...), Append(nil, pattern(n)))
	}
}

// TestClearIsClear: every byte of every step zero, nothing past the end.
func TestClearIsClear(t *testing.T) {
	b := pattern(3*step + 5)
	Clear(b[:3*step+4])
	assert.Equal(t, make([]byte, 3*step+4), b[:3*step+4])
	assert.Equal(t, pattern(3*step + 5)[3*step+4], b[3*step+4])
}
