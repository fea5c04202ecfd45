package provider

import (
	"encoding/json"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
)

// The plugin reads its config and, for list, its state with this small
// scanner rather than with encoding/json (sdk.DecodeConfig, sdk.DecodeState):
// the plugin then links neither encoding/json's codec nor the reflection it
// works through, which keeps the module small and its load fast. Both
// documents are tiny in structure: an object of two integers, and an object
// holding one array whose elements are kept as the exact bytes stored.

// maxDepth bounds nesting so that a hostile state cannot exhaust the stack.
const maxDepth = 1000

type scanner struct {
	b []byte
	i int
}

// errAt is a malformed document: invalid_argument, as a state or config
// that does not decode has always been.
func (s *scanner) errAt(what, msg string) error {
	return &abi.Error{Code: abi.CodeInvalidArgument, Message: "inmemory: decode " + what + ": " + abi.ErrInvalidArgument.Error() +
		": malformed JSON at offset " + strconv.Itoa(s.i) + ": " + msg}
}

// peek skips white space and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// skip moves past one valid JSON value; it returns a description of what is
// wrong otherwise.
func (s *scanner) skip(depth int) string {
	if depth > maxDepth {
		return "nested too deeply"
	}
	switch c := s.peek(); {
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.i++
		if s.peek() == end {
			s.i++
			return ""
		}
		for {
			if c == '{' {
				if s.peek() != '"' {
					return "want a string key"
				}
				if msg := s.skipString(); msg != "" {
					return msg
				}
				if s.peek() != ':' {
					return "want ':'"
				}
				s.i++
			}
			if msg := s.skip(depth + 1); msg != "" {
				return msg
			}
			switch s.peek() {
			case ',':
				s.i++
			case end:
				s.i++
				return ""
			default:
				return "want ',' or '" + string(end) + "'"
			}
		}
	case c == '"':
		return s.skipString()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 0:
		return "unexpected end of input"
	}
	return "unexpected " + strconv.QuoteRune(rune(s.b[s.i]))
}

func (s *scanner) literal(lit string) string {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return "want " + lit
	}
	s.i += len(lit)
	return ""
}

// number moves past -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (s *scanner) number() string {
	digits := func() bool {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i > start
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if !digits() {
		return "malformed number"
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !digits() {
			return "malformed number"
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !digits() {
			return "malformed number"
		}
	}
	return ""
}

// skipString moves past the string at the current '"'.
func (s *scanner) skipString() string {
	for s.i++; s.i < len(s.b); {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return ""
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return "unterminated escape"
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return "short \\u escape"
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return "bad \\u escape"
					}
				}
				s.i += 6
			default:
				return "bad escape"
			}
		case c < 0x20:
			return "control character in string"
		default:
			s.i++
		}
	}
	return "unterminated string"
}

// object calls member for each member of the object (nothing for null),
// with the key's raw bytes between the quotes; member must move past the
// value. Keys are compared undecoded: the schemas allow only plain names.
func (s *scanner) object(what string, member func(key string) error) error {
	switch s.peek() {
	case 'n':
		if msg := s.literal("null"); msg != "" {
			return s.errAt(what, msg)
		}
		return s.end(what)
	case '{':
	default:
		return s.errAt(what, "want an object")
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return s.end(what)
	}
	for {
		if s.peek() != '"' {
			return s.errAt(what, "want a string key")
		}
		start := s.i
		if msg := s.skipString(); msg != "" {
			return s.errAt(what, msg)
		}
		key := string(s.b[start+1 : s.i-1])
		if s.peek() != ':' {
			return s.errAt(what, "want ':'")
		}
		s.i++
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return s.end(what)
		default:
			return s.errAt(what, "want ',' or '}'")
		}
	}
}

// end checks that nothing but white space follows the document.
func (s *scanner) end(what string) error {
	if s.peek(); s.i != len(s.b) {
		return s.errAt(what, "data after the document")
	}
	return nil
}

// value moves past a value, reporting a malformed one.
func (s *scanner) value(what string) error {
	if msg := s.skip(1); msg != "" {
		return s.errAt(what, msg)
	}
	return nil
}

// integer decodes an integer (or null, as 0) as encoding/json decodes one
// into an int.
func (s *scanner) integer(what string) (int, error) {
	switch c := s.peek(); {
	case c == 'n':
		if msg := s.literal("null"); msg != "" {
			return 0, s.errAt(what, msg)
		}
		return 0, nil
	case c != '-' && (c < '0' || c > '9'):
		return 0, s.errAt(what, "want an integer")
	}
	start := s.i
	if msg := s.number(); msg != "" {
		return 0, s.errAt(what, msg)
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, strconv.IntSize)
	if err != nil {
		s.i = start
		return 0, s.errAt(what, "want an integer")
	}
	return int(n), nil
}

// parseConfig decodes the config; absent members are zero and unknown ones
// are ignored.
func parseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	if len(raw) == 0 {
		return cfg, nil
	}
	s := scanner{b: raw}
	err := s.object("config", func(key string) (err error) {
		switch key {
		case "max_messages":
			cfg.MaxMessages, err = s.integer("config")
		case "max_tokens":
			cfg.MaxTokens, err = s.integer("config")
		default:
			err = s.value("config")
		}
		return err
	})
	return cfg, err
}

// stateMessages returns the elements of the state's messages array, each
// the exact bytes stored, without decoding them.
func stateMessages(raw json.RawMessage) ([]json.RawMessage, error) {
	const what = "state"
	var msgs []json.RawMessage
	if len(raw) == 0 {
		return nil, nil
	}
	s := scanner{b: raw}
	err := s.object(what, func(key string) error {
		if key != "messages" {
			return s.value(what)
		}
		switch s.peek() {
		case 'n':
			msgs = nil
			return s.value(what)
		case '[':
		default:
			return s.errAt(what, "messages: want an array")
		}
		s.i++
		msgs = []json.RawMessage{}
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			s.peek()
			start := s.i
			if err := s.value(what); err != nil {
				return err
			}
			msgs = append(msgs, raw[start:s.i:s.i])
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return s.errAt(what, "want ',' or ']'")
			}
		}
	})
	return msgs, err
}
