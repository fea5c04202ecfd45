package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"unicode"
)

// A table of contents sits between these two lines. The check regenerates
// it from the file's headings (levels 2 and 3, outside fenced code) and
// reports a difference; -toc writes the regenerated one.
const (
	tocStart = "<!-- contents: go run ./internal/docnames -toc FILE.md -->"
	tocEnd   = "<!-- /contents -->"
)

var heading = regexp.MustCompile(`^(#{2,3}) +(.+?) *#*$`)

// tableOfContents is the list of the headings in lines, linked by the
// anchors GitHub gives them.
func tableOfContents(lines []string) string {
	var b strings.Builder
	seen := map[string]int{}
	inFence := false
	for _, line := range lines {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		indent := strings.Repeat("  ", len(m[1])-2)
		fmt.Fprintf(&b, "%s- [%s](#%s)\n", indent, m[2], a)
	}
	return b.String()
}

// anchor is GitHub's anchor for a heading: lower case, letters, numbers,
// marks, '-' and connector punctuation ('_') kept, spaces as '-', the rest
// dropped.
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// updateTOC returns data with its table of contents regenerated, the line
// of the start marker (0 when there is none), and whether it changed.
func updateTOC(data string) (string, int, bool, error) {
	lines := strings.Split(data, "\n")
	start, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case tocStart:
			start = i
		case tocEnd:
			if start >= 0 && end < 0 {
				end = i
			}
		}
	}
	if start < 0 {
		return data, 0, false, nil
	}
	if end < 0 {
		return data, start + 1, false, fmt.Errorf("line %d: %q without %q", start+1, tocStart, tocEnd)
	}
	toc := tableOfContents(lines[end+1:])
	var out []string
	out = append(out, lines[:start+1]...)
	out = append(out, "")
	out = append(out, strings.Split(strings.TrimSuffix(toc, "\n"), "\n")...)
	out = append(out, "")
	out = append(out, lines[end:]...)
	updated := strings.Join(out, "\n")
	return updated, start + 1, updated != data, nil
}

// checkTOC reports a table of contents that differs from the headings.
func checkTOC(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	_, line, changed, err := updateTOC(string(data))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return "", nil
	}
	return fmt.Sprintf("%s:%d: the table of contents differs from the headings; run go run ./internal/docnames -toc %s", path, line, path), nil
}

// writeTOC regenerates the table of contents of path in place.
func writeTOC(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, line, changed, err := updateTOC(string(data))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if line == 0 {
		return fmt.Errorf("%s: no line %q to put a table of contents after (and %q to end it)", path, tocStart, tocEnd)
	}
	if !changed {
		return nil
	}
	return os.WriteFile(path, []byte(updated), 0o644)
}
