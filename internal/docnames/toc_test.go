package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnchor(t *testing.T) {
	tests := []struct {
		name, heading, want string
	}{
		{"words", "Why JSON on the wire?", "why-json-on-the-wire"},
		{"code and punctuation", "Why may `list` answer by reference, with the host paging (ABI 1.1)?", "why-may-list-answer-by-reference-with-the-host-paging-abi-11"},
		{"ellipsis and symbols dropped", "Why does a session's revision stop at 2^63−2?", "why-does-a-sessions-revision-stop-at-2632"},
		{"underscore and hyphen kept", "4.4 list_state re-read", "44-list_state-re-read"},
		{"non-ASCII letters kept", "Préemption", "préemption"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, anchor(tt.heading))
		})
	}
}

var tocDoc = "# Title\n\n" + tocStart + "\n" + tocEnd + "\n\n" +
	"## One\n\n" +
	"```sh\n## a shell comment, not a heading\n```\n\n" +
	"### Why `x`?\n\n" +
	"## One\n\n" +
	"#### Too deep for the contents\n"

var tocWant = "# Title\n\n" + tocStart + "\n\n" +
	"- [One](#one)\n" +
	"  - [Why `x`?](#why-x)\n" +
	"- [One](#one-1)\n\n" +
	tocEnd + "\n\n## One\n"

// TestTOC: -toc writes the headings of levels 2 and 3, outside fenced code,
// with GitHub's anchors (a repeated heading numbered), and the check
// reports a table that differs from the headings until it is written.
func TestTOC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	require.NoError(t, os.WriteFile(path, []byte(tocDoc), 0o644))

	msg, err := checkTOC(path)
	require.NoError(t, err)
	assert.Equal(t, path+":3: the table of contents differs from the headings; run go run ./internal/docnames -toc "+path, msg)

	require.NoError(t, writeTOC(path))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, tocWant, string(got)[:len(tocWant)])

	msg, err = checkTOC(path)
	require.NoError(t, err)
	assert.Empty(t, msg, "a written table of contents passes the check")
}

func TestTOCRefusals(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"no markers", "# Title\n\n## One\n", "no line"},
		{"start without end", "# Title\n" + tocStart + "\n## One\n", "without"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "doc.md")
			require.NoError(t, os.WriteFile(path, []byte(tt.doc), 0o644))
			err := writeTOC(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tt.doc, string(data), "a refused file is left as it was")
		})
	}
}
