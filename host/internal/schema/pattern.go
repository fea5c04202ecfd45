package schema

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// handPatterns are the "pattern" keywords the host checks by hand rather
// than with the library's regular expression: the hex sha256 digests of
// schemas/session.json, of which a session holds one for each plugin, run
// and compaction. A turn validates the session it commits, and matching
// them with package regexp was about 20 thousand instructions of a turn
// through a database plugin. FuzzHandPatterns proves each equal to its
// pattern.
var handPatterns = map[string]func(string) bool{
	`^[0-9a-f]{64}$`:    IsSHA256Hex[string],
	`^([0-9a-f]{64})?$`: func(s string) bool { return s == "" || IsSHA256Hex(s) },
}

// IsSHA256Hex reports whether s is a sha256 digest as the project's
// schemas write one: 64 lower-case hexadecimal digits.
func IsSHA256Hex[T string | []byte](s T) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// handPattern is a "pattern" keyword checked by match. It fails as the
// library's own keyword does: at keyword "pattern", with its message.
type handPattern struct {
	re    *regexp.Regexp
	match func(string) bool
}

func (p handPattern) Validate(ctx jsonschema.ValidationContext, v any) error {
	if s, ok := v.(string); ok && !p.match(s) {
		return ctx.Error("pattern", "does not match pattern %s", quote(p.re.String()))
	}
	return nil
}

// quote quotes as the library quotes a pattern in its message.
func quote(s string) string {
	s = fmt.Sprintf("%q", s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}

// onlyHandPatterns reports whether every extension of s is a handPattern
// or a boundedPattern, which constrain strings only, as the library's
// "pattern" keyword does, or a step, which constrains nothing.
func onlyHandPatterns(s *jsonschema.Schema) bool {
	for _, e := range s.Extensions {
		switch e.(type) {
		case handPattern, boundedPattern, step:
		default:
			return false
		}
	}
	return true
}

// checkPatternsByHand gives every schema under root whose pattern is one
// of handPatterns its hand-written check instead, where that keeps the
// failures the same: the library reports an extension's failure after
// those of the other keywords, so only a schema with no keyword beside
// its type and pattern that can fail is changed. It runs once, when root
// is compiled and before anyone validates with it.
func checkPatternsByHand(root *jsonschema.Schema) {
	walkSchemas(root, func(s *jsonschema.Schema) bool {
		if s.Pattern == nil {
			return true
		}
		match, ok := handPatterns[s.Pattern.String()]
		if !ok || !onlyTypeAndPattern(s) {
			return true
		}
		s.Extensions = map[string]jsonschema.ExtSchema{"pattern": handPattern{re: s.Pattern, match: match}}
		s.Pattern = nil
		return true
	})
}

func onlyTypeAndPattern(s *jsonschema.Schema) bool {
	return s.Always == nil && s.Format == "" && s.Ref == nil && s.RecursiveRef == nil && s.DynamicRef == nil &&
		len(s.Constant) == 0 && len(s.Enum) == 0 && s.Not == nil && len(s.AllOf) == 0 && len(s.AnyOf) == 0 &&
		len(s.OneOf) == 0 && s.If == nil && s.MinLength == -1 && s.MaxLength == -1 && s.ContentEncoding == "" &&
		s.ContentMediaType == "" && s.ContentSchema == nil && len(s.Extensions) == 0
}
