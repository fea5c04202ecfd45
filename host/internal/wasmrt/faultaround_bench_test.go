//go:build linux

package wasmrt

import (
	"context"
	"syscall"
	"testing"
)

// BenchmarkCallAfterGiveBack: a store on an instance whose module's code
// was given back, as after a guest's start or 2 s idle, so that the call
// faults back in what it runs: one page a fault ("single", the host's
// way), the kernel's fault-around window a fault ("windows": the
// registration ruled out), and, for the floor, with the code left
// resident ("resident"). Each runs on a module of its own. Reports the
// process's minor faults a call.
func BenchmarkCallAfterGiveBack(b *testing.B) {
	for _, mode := range []string{"single", "windows", "resident"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			m, code, in := mappedInstance(b)
			if mode == "windows" {
				m.cur.Load().faults.refused = true
			}
			if _, err := in.Call(ctx, "store", storeRequest); err != nil {
				b.Fatal(err)
			}
			var before, after syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			for b.Loop() {
				if mode != "resident" {
					b.StopTimer()
					syscall.Madvise(code, syscall.MADV_DONTNEED)
					b.StartTimer()
				}
				if _, err := in.Call(ctx, "store", storeRequest); err != nil {
					b.Fatal(err)
				}
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			b.ReportMetric(float64(after.Minflt-before.Minflt)/float64(b.N), "faults/op")
		})
	}
}
