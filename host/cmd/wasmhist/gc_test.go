package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLessGCWhileLoadingKeepsTheUsersChoice: the command turns the
// collector off while loading, bounded by loadingMemoryLimit or by the
// user's GOMEMLIMIT if lower, and gives both settings back.
func TestLessGCWhileLoadingKeepsTheUsersChoice(t *testing.T) {
	tests := []struct {
		name      string
		gcPercent int
		limit     int64
		wantLimit int64
	}{
		{"default", 100, math.MaxInt64, loadingMemoryLimit},
		{"GOGC higher", 800, math.MaxInt64, loadingMemoryLimit},
		{"GOGC off", -1, math.MaxInt64, loadingMemoryLimit},
		{"GOMEMLIMIT lower", 100, 64 << 20, 64 << 20},
		{"GOMEMLIMIT higher", 100, 4 << 30, loadingMemoryLimit},
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(tt.gcPercent)
			debug.SetMemoryLimit(tt.limit)
			restore := lessGCWhileLoading()
			assert.Equal(t, -1, debug.SetGCPercent(-1), "GOGC while loading: off")
			assert.Equal(t, tt.wantLimit, debug.SetMemoryLimit(-1), "the memory limit while loading")
			restore()
			assert.Equal(t, tt.gcPercent, debug.SetGCPercent(tt.gcPercent), "GOGC restored")
			assert.Equal(t, tt.limit, debug.SetMemoryLimit(-1), "GOMEMLIMIT restored")
		})
	}
}
