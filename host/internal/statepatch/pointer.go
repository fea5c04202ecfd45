package statepatch

import (
	"fmt"
	"strconv"
	"strings"
)

// ParsePointer splits an RFC 6901 JSON Pointer into its unescaped
// reference tokens. "" is the whole document; any other pointer starts with
// '/'. "~1" stands for '/' and "~0" for '~'; any other use of '~' is an error.
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("%w: %q does not start with '/'", ErrPointer, p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if !strings.Contains(t, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, fmt.Errorf("%w: %q: '~' must be followed by 0 or 1", ErrPointer, p)
			}
			if t[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return parts, nil
}

// FormatPointer is the inverse of ParsePointer.
func FormatPointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
		}
		b.WriteString(t)
	}
	return b.String()
}

// arrayIndex parses an array index token: "0" or a decimal number without
// leading zeros, below length n (or equal to it when atEnd allows the
// position just past the last element).
func arrayIndex(t string, n int, atEnd bool) (int, error) {
	if t == "" || (len(t) > 1 && t[0] == '0') || strings.TrimLeft(t, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not an array index", t)
	}
	i, err := strconv.Atoi(t)
	if err != nil || i > n || (i == n && !atEnd) {
		return 0, fmt.Errorf("index %s is out of range (array length %d)", t, n)
	}
	return i, nil
}
