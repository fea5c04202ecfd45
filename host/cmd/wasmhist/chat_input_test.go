package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Keys as a terminal sends them.
const (
	keyLeft  = "\x1b[D"
	keyUp    = "\x1b[A"
	keyHome  = "\x01" // Ctrl-A
	keyEnter = "\r"
	keyCtrlC = "\x03"
	keyCtrlD = "\x04"
)

// editLines types keys into a line editor with history hist and returns
// what it read, up to and including the line that ends it.
func editLines(t *testing.T, hist *historyFile, keys string) []line {
	t.Helper()
	var out bytes.Buffer
	ed := newLineEditor(strings.NewReader(keys), &out, -1, hist)
	defer ed.close()
	var got []line
	for {
		l := <-ed.next()
		got = append(got, l)
		if l.text == "" {
			return got
		}
	}
}

// TestLineEditor: the interactive chat's line editor edits a line with the
// arrow and Emacs keys, recalls earlier lines, from this run and from the
// history file of earlier runs, and tells Ctrl-C from Ctrl-D; all without
// a terminal.
func TestLineEditor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "wasmhist", "chat_history")
	tests := []struct {
		name string
		keys string
		want []line
	}{
		{"edit", "helo" + keyLeft + "l" + keyEnter + "orld" + keyHome + "w" + keyEnter + keyCtrlD,
			[]line{{text: "hello"}, {text: "world"}, {eof: true}}},
		{"recall from this run", "first" + keyEnter + keyUp + keyEnter + keyCtrlD,
			[]line{{text: "first"}, {text: "first"}, {eof: true}}},
		{"recall from the file of earlier runs", keyUp + keyUp + keyEnter + keyCtrlC,
			[]line{{text: "world"}, {interrupted: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, editLines(t, loadHistory(path), tc.keys))
		})
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "hello\nworld\nfirst\nworld\n", string(b), "each line once in a row, in order")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the history is the user's alone")
}

// TestHistoryFileIsBounded: the history keeps its last maxHistoryLines
// lines, and a file grown past twice that is cut back.
func TestHistoryFileIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chat_history")
	var b strings.Builder
	for i := range 2*maxHistoryLines + 1 {
		b.WriteString(strings.Repeat("x", i%7+1) + "\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	h := loadHistory(path)
	assert.Equal(t, maxHistoryLines, h.Len())
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, maxHistoryLines, strings.Count(string(again), "\n"))
}
