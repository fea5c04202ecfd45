package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// layoutHeading starts the section of README.md that lists the package
// directories.
const layoutHeading = "## Layout"

var pathToken = regexp.MustCompile(`[A-Za-z0-9_.\-/]+`)

// checkLayout reports each directory in dirs that the Layout section of
// the README at path does not name (as a path, with or without a trailing
// slash), so that a package added or moved shows in the one map of the
// tree.
func checkLayout(path string, dirs []string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	named := map[string]bool{}
	for i, l := range lines {
		if start < 0 {
			if strings.TrimSpace(l) == layoutHeading {
				start = i
			}
			continue
		}
		if strings.HasPrefix(l, "## ") {
			break
		}
		for _, tok := range pathToken.FindAllString(l, -1) {
			named[strings.TrimSuffix(tok, "/")] = true
		}
	}
	if start < 0 {
		return []string{fmt.Sprintf("%s:1: no %q section to list the package directories in; add one", path, layoutHeading)}, nil
	}
	var msgs []string
	for _, d := range dirs {
		if !named[d] {
			msgs = append(msgs, fmt.Sprintf("%s:%d: the layout does not name package directory %s; add a line saying what it holds", path, start+1, d))
		}
	}
	return msgs, nil
}
