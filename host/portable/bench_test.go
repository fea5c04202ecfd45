package portable_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmhist/wasmhist/host/portable"
)

// cpuTime is the CPU time the process used (user and system, every
// thread), which a busy shared machine inflates less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkExport and BenchmarkImport time a one-slot session of n
// messages (about 1 KiB each) through the Writer and the Reader, in memory;
// ns/msg (wall) and
// cpu-ns/msg (CPU time of the process) are what must stay flat from 1k to
// 100k (BENCHMARKS.md).
func BenchmarkExport(b *testing.B) {
	text := strings.Repeat("lorem ipsum ", 160)
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				w, err := portable.NewWriter(io.Discard, oneSlot())
				if err != nil {
					b.Fatal(err)
				}
				if err := w.BeginSlot("history"); err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if err := w.WriteMessage(messageAt(i, text)); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*n), "cpu-ns/msg")
		})
	}
}

func BenchmarkImport(b *testing.B) {
	text := strings.Repeat("lorem ipsum ", 160)
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			var doc bytes.Buffer
			w, _ := portable.NewWriter(&doc, oneSlot())
			_ = w.BeginSlot("history")
			for i := range n {
				_ = w.WriteMessage(messageAt(i, text))
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(doc.Len()))
			cpu := cpuTime()
			for b.Loop() {
				r, err := portable.NewReader(bytes.NewReader(doc.Bytes()), portable.Limits{})
				if err != nil {
					b.Fatal(err)
				}
				got := 0
				for sr, err := range r.Slots() {
					if err != nil {
						b.Fatal(err)
					}
					for _, err := range sr.Messages() {
						if err != nil {
							b.Fatal(err)
						}
						got++
					}
				}
				if got != n {
					b.Fatalf("read %d messages of %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N*n), "cpu-ns/msg")
		})
	}
}
