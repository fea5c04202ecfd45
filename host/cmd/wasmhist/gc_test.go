package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLessGCWhileLoadingKeepsTheUsersChoice: the command collects less
// while loading, but never more than the user asked for (GOGC above
// loadingGCPercent, or off), and gives the setting back.
func TestLessGCWhileLoadingKeepsTheUsersChoice(t *testing.T) {
	tests := []struct {
		name        string
		user        int
		wantLoading int
	}{
		{"default", 100, loadingGCPercent},
		{"lower", 50, loadingGCPercent},
		{"higher", 800, 800},
		{"off", -1, -1},
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(tt.user)
			restore := lessGCWhileLoading()
			assert.Equal(t, tt.wantLoading, debug.SetGCPercent(restore), "GOGC while loading")
			assert.Equal(t, tt.user, debug.SetGCPercent(tt.user), "GOGC restored")
		})
	}
}
