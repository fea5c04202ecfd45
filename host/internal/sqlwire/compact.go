package sqlwire

// maxCompactDepth is the deepest nesting isCompactJSON follows; deeper
// text goes to json.Compact, which bounds its own depth.
const maxCompactDepth = 256

// isCompactJSON reports whether text is one JSON value with no space
// outside its strings: what json.Compact accepts and leaves as it is. It
// reads the text once, a byte at a time, where json.Compact runs its
// scanner's state machine on every byte and copies it; a JSON column
// written by encoding/json (a message a plugin stored) is such text. false
// says nothing: the text may still be JSON, for json.Compact to decide.
//
// Like encoding/json, it accepts any byte from 0x20 up inside a string,
// invalid UTF-8 included (FuzzIsCompactJSON holds it to json.Compact).
func isCompactJSON(text []byte) bool {
	i, ok := compactValue(text, 0, 0)
	return ok && i == len(text)
}

// compactValue reads one value from text[i:] and returns where it ends.
func compactValue(text []byte, i, depth int) (int, bool) {
	if i >= len(text) {
		return i, false
	}
	switch c := text[i]; {
	case c == '"':
		return compactString(text, i+1)
	case c == '{', c == '[':
		if depth >= maxCompactDepth {
			return i, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i++
		if i < len(text) && text[i] == end {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i >= len(text) || text[i] != '"' {
					return i, false
				}
				if i, ok = compactString(text, i+1); !ok {
					return i, false
				}
				if i >= len(text) || text[i] != ':' {
					return i, false
				}
				i++
			}
			if i, ok = compactValue(text, i, depth+1); !ok {
				return i, false
			}
			if i >= len(text) {
				return i, false
			}
			switch text[i] {
			case ',':
				i++
			case end:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return compactNumber(text, i)
	case c == 't':
		return compactLiteral(text, i, "true")
	case c == 'f':
		return compactLiteral(text, i, "false")
	case c == 'n':
		return compactLiteral(text, i, "null")
	}
	return i, false
}

func compactLiteral(text []byte, i int, lit string) (int, bool) {
	if len(text)-i < len(lit) || string(text[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// compactString reads a string from just after its opening quote.
func compactString(text []byte, i int) (int, bool) {
	for i < len(text) {
		switch c := text[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(text) {
				return i, false
			}
			switch text[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(text)-i < 6 {
					return i, false
				}
				for _, h := range text[i+2 : i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return i, false
					}
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
	return i, false
}

// compactNumber reads a number with RFC 8259's grammar.
func compactNumber(text []byte, i int) (int, bool) {
	digits := func(i int) (int, bool) {
		start := i
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			i++
		}
		return i, i > start
	}
	if text[i] == '-' {
		i++
	}
	var ok bool
	switch {
	case i < len(text) && text[i] == '0':
		i++
	case i < len(text) && text[i] >= '1' && text[i] <= '9':
		i, _ = digits(i)
	default:
		return i, false
	}
	if i < len(text) && text[i] == '.' {
		if i, ok = digits(i + 1); !ok {
			return i, false
		}
	}
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		if i < len(text) && (text[i] == '+' || text[i] == '-') {
			i++
		}
		if i, ok = digits(i); !ok {
			return i, false
		}
	}
	return i, true
}
