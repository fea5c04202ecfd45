package offline

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// pattern is a regular expression compiled on its first use, behind a
// test every string it matches passes (may). Compiling the model's sixteen
// expressions at package initialisation cost every process of the command
// about 3 M instructions (0.6 ms), `wasmhist version` included; a greeting
// now compiles two of them. may is a necessary condition only: where it
// holds the expression decides, so the matches are the expression's own.
type pattern struct {
	re  func() *regexp.Regexp
	may func(string) bool
}

func lazy(expr string, may func(string) bool) pattern {
	return pattern{re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) }), may: may}
}

func (p pattern) MatchString(s string) bool { return p.may(s) && p.re().MatchString(s) }

func (p pattern) FindString(s string) string {
	if !p.may(s) {
		return ""
	}
	return p.re().FindString(s)
}

func (p pattern) FindStringSubmatch(s string) []string {
	if !p.may(s) {
		return nil
	}
	return p.re().FindStringSubmatch(s)
}

func (p pattern) FindAllStringIndex(s string, n int) [][]int {
	if !p.may(s) {
		return nil
	}
	return p.re().FindAllStringIndex(s, n)
}

func (p pattern) ReplaceAllString(src, repl string) string {
	if !p.may(src) {
		return src
	}
	return p.re().ReplaceAllString(src, repl)
}

// startsFold returns the test of an expression anchored at the start under
// (?i) whose first letter is one of letters: the string's first rune
// equals one of them under Unicode simple case folding, as (?i) compares
// (so "ſ" passes for s, and the Kelvin sign for k).
func startsFold(letters string) func(string) bool {
	return func(s string) bool {
		r, n := utf8.DecodeRuneInString(s)
		if n == 0 {
			return false
		}
		for _, l := range letters {
			if r == l || strings.EqualFold(string(r), string(l)) {
				return true
			}
		}
		return false
	}
}

// containsFold returns the test of an expression under (?i) whose every
// match contains one of words. The words' letters must fold to ASCII
// letters only (not k or s), so lower-casing ASCII keeps every match.
func containsFold(words ...string) func(string) bool {
	return func(s string) bool {
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		for _, w := range words {
			if strings.Contains(string(b), w) {
				return true
			}
		}
		return false
	}
}
