package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// rationaleRef is a Go comment's pointer to an entry of RATIONALE.md:
// the word RATIONALE, then within a few characters the entry's title in
// double quotes, which may run over the comment's next lines.
var rationaleRef = regexp.MustCompile(`RATIONALE[^"]{0,30}"(Why [^"]*?\?)"`)

// checkRationale reports each Go comment under root that names an entry
// of RATIONALE.md by a title no heading of that file has, so that a
// renamed entry does not leave the code pointing at nothing.
func checkRationale(root string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, "RATIONALE.md"))
	if err != nil {
		return nil, err
	}
	titles := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "#") {
			titles[strings.TrimSpace(strings.TrimLeft(l, "#"))] = true
		}
	}
	files, err := filesOf(root, ".go")
	if err != nil {
		return nil, err
	}
	var msgs []string
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(src), "\n")
		for i, l := range lines {
			// Only comments: a string that holds the word is not a pointer.
			at := strings.Index(l, "RATIONALE")
			if at < 0 || !strings.HasPrefix(strings.TrimSpace(l), "//") {
				continue
			}
			// The line and the three after it, as one run of comment text.
			text := []string{l[at:]}
			for _, c := range lines[i+1 : min(i+4, len(lines))] {
				text = append(text, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(c), "//")))
			}
			m := rationaleRef.FindStringSubmatch(strings.Join(text, " "))
			if m != nil && !titles[m[1]] {
				msgs = append(msgs, fmt.Sprintf("%s:%d: RATIONALE.md has no entry %q; name an existing heading, or add the entry", path, i+1, m[1]))
			}
		}
	}
	return msgs, nil
}
